"""Validation of response gold files and runs: every problem with its JSON path, nothing partial."""

import math

import pytest

from scoring.kinds.response.formats import load_response_gold, load_response_run
from scoring.validation import ValidationFailed, parse_json

GOLD = [
    {"id": "c17", "context": [{"sender": "user", "text": "What are you training for?"}],
     "references": [{"text": "I am competing for a national chess tournament.", "weight": 1.0},
                    {"text": "Nothing, I just like it.", "weight": -0.3}],
     "nuggets": [{"text": "I am sorry,", "act": "Apology", "diff": [{"text": "Thanks,", "act": "Thanking"}],
                  "same": ["I apologise,"]}]},
    {"id": 18, "references": [{"text": "See you later."}]},
]


def errors_of(function, *args):
    with pytest.raises(ValidationFailed) as caught:
        function(*args)
    return caught.value.errors


def test_valid_gold_and_run():
    gold = load_response_gold(GOLD)
    assert gold.ids == ["c17", "18"]
    assert gold.references[1] == [("See you later.", 1.0)]  # unrated: weight 1
    assert gold.contexts[0] == [{"sender": "user", "text": "What are you training for?"}]
    run = load_response_run(parse_json(b'[{"id": "18", "response": "Bye!"}, {"id": "c17", "response": '
                                       b'"I am sorry,  I do not know.", "nuggets": [{"text": "I am sorry,", '
                                       b'"act": "Apology"}, {"text": "I do not know.", "act": "Confusion"}]}]'), gold)
    assert run.responses == ["I am sorry,  I do not know.", "Bye!"]
    assert run.nuggets[1] is None
    turns = run.turns(gold)
    assert [t.item for t in turns] == [0, 1]
    apology, confusion = turns[0].nuggets
    assert apology.diff == ("Thanks,",) and apology.same == ("I apologise,",)  # from the gold
    assert confusion.diff == () and confusion.same == ()
    assert turns[1].nuggets is None


def test_gold_every_problem_listed():
    bad = [
        {"id": "a", "references": [{"text": "ok", "weight": 1.5}, {"text": "", "weight": math.nan},
                                   {"text": 3, "weight": True}]},
        {"id": "a", "references": [{"text": "x"}]},
        {"id": "b", "references": [{"text": "only bad", "weight": -0.2}, {"text": "zero", "weight": 0}]},
        {"id": "c"},
        {"id": "d", "references": [{"text": "fine"}], "context": [{"sender": "user"}], "nuggets": [
            {"text": "Hi", "act": "Greeting"},
            {"text": "Sorry", "act": "Apology", "same": [""],
             "diff": [{"text": "x", "act": "Apology"}, {"text": "y", "act": "Thanking"},
                      {"text": "z", "act": "Thanking"}]},
        ]},
        {"id": None, "references": []},
        "not an object",
        {"id": "e", "references": [{"text": "nul\x00"}]},
    ]
    acts = ", ".join(load_response_gold(GOLD).acts)
    # Problems with ids come first (every entry's id is checked before the entries are read).
    assert errors_of(load_response_gold, bad) == [
        '[1].id: "a" repeats the id of [0]',
        "[5].id: must be a non-empty string or an integer, not None",
        '[6]: must be an object, not "not an object"',
        "[0].references[0].weight: 1.5 is outside [-1, 1]",
        "[0].references[1].text: must not be empty",
        "[0].references[1].weight: must be a finite number, not nan",
        "[0].references[2].text: must be a string, not 3",
        "[0].references[2].weight: must be a finite number, not True",
        "[2].references: no reference has a positive weight",
        "[3].references: is missing",
        "[4].context[0].text: must be a string, not None",
        f'[4].nuggets[0].act: "Greeting" is not an act of this task\'s taxonomy ({acts})',
        '[4].nuggets[1].diff[0].act: must differ from the nugget\'s act "Apology"',
        '[4].nuggets[1].diff[2].act: "Thanking" repeats the act of diff[1] (one alternative per other act)',
        "[4].nuggets[1].same[0]: must not be empty",
        "[7].references[0].text: must not contain NUL characters",
    ]


def test_gold_reference_text_problems_are_listed_with_the_weights():
    errors = errors_of(load_response_gold, [{"id": "a", "references": [{"text": "", "weight": 0.5}, {"text": 7}]}])
    assert errors == ["[0].references[0].text: must not be empty", "[0].references[1].text: must be a string, not 7"]


@pytest.mark.parametrize("data", [{}, [], "x", None])
def test_gold_must_be_a_non_empty_list(data):
    assert len(errors_of(load_response_gold, data)) == 1


def test_run_every_problem_listed():
    gold = load_response_gold(GOLD + [{"id": "z", "references": [{"text": "ok"}]},
                                      {"id": "y", "references": [{"text": "ok"}]}])
    run = [
        {"id": "c17", "response": "Hello there. Bye.", "nuggets": [{"text": "Hello there.", "act": "Opening"},
                                                                    {"text": "Bye!", "act": "Closing"}]},
        {"id": "nope", "response": "x"},
        {"id": 18, "response": "   "},
        {"id": "18", "response": "dup"},
    ]
    assert errors_of(load_response_run, run, gold) == [
        '[3].id: "18" repeats the id of [2]',
        "[0].nuggets: the nugget texts put together (whitespace aside) are not the response",
        '[1].id: "nope" is not an item of the gold',
        "[2].response: must not be empty",
        '2 gold item(s) have no response: "z", "y"',
    ]


def test_run_nugget_problems():
    gold = load_response_gold(GOLD)
    run = [
        {"id": "c17", "response": "A b", "nuggets": [{"text": "A", "act": "Sorry"}, {"text": "b"}, 5]},
        {"id": "18", "response": 42, "nuggets": []},
    ]
    assert errors_of(load_response_run, run, gold) == [
        '[0].nuggets[0].act: "Sorry" is not an act of this task\'s taxonomy (' + ", ".join(gold.acts) + ")",
        "[0].nuggets[1].act: must be a dialogue act (a string), not None",
        "[0].nuggets[2]: must be an object with text and act, not 5",
        "[1].response: must be a string, not 42",
    ]
    empty = [{"id": "c17", "response": "A"}, {"id": "18", "response": "B", "nuggets": []}]
    assert errors_of(load_response_run, empty, gold) == [
        "[1].nuggets: must be a non-empty list of {\"text\", \"act\"} objects, not []"
    ]


def test_run_with_more_entries_than_the_gold_is_refused_before_reading_them():
    gold = load_response_gold(GOLD)

    class Exploding(dict):
        def get(self, *args):
            raise AssertionError("an entry was read")

        def __contains__(self, key):
            raise AssertionError("an entry was read")

    assert errors_of(load_response_run, [Exploding()] * 3, gold) == [
        "the run has 3 entries but the gold has 2 items"
    ]


def test_overlong_response_refused():
    gold = load_response_gold(GOLD)
    errors = errors_of(load_response_run, [{"id": "c17", "response": "a" * 10_001}, {"id": "18", "response": "b"}],
                       gold)
    assert errors == ["[0].response: is 10001 characters long; at most 10000 are allowed"]


def test_nuggets_per_response_and_alternatives_per_nugget_are_bounded():
    """Issue 24: 7,500 one-character nuggets grew the worker by 2.8 GB; 6,000 alternatives took 44 s."""
    gold = load_response_gold(GOLD)
    many = [{"id": "c17", "response": "a" * 101, "nuggets": [{"text": "a", "act": "Opinion"}] * 101},
            {"id": "18", "response": "b"}]
    assert errors_of(load_response_run, many, gold) == [
        "[0].nuggets: has 101 nuggets; at most 100 are allowed per response"]
    at_limit = [{"id": "c17", "response": "a" * 100, "nuggets": [{"text": "a", "act": "Opinion"}] * 100},
                {"id": "18", "response": "b"}]
    assert len(load_response_run(at_limit, gold).nuggets[0]) == 100
    alternatives = [{"id": "c17", "response": "I am sorry.", "nuggets": [
        {"text": "I am sorry.", "act": "Apology", "diff": [{"text": "Thanks.", "act": "Thanking"}],
         "same": [f"Sorry {k}." for k in range(50)]}]}, {"id": "18", "response": "b"}]
    assert errors_of(load_response_run, alternatives, gold) == [
        "[0].nuggets[0]: has 51 alternatives (diff and same together); at most 50 are allowed"]
    alternatives[0]["nuggets"][0]["same"].pop()
    assert len(load_response_run(alternatives, gold).nuggets[0][0].same) == 49
    # The gold's own alternatives and nuggets have the same bounds (a run's nugget takes them).
    gold_data = [dict(GOLD[0], nuggets=[{"text": "x", "act": "Apology", "same": ["y"] * 51}]), GOLD[1]]
    assert errors_of(load_response_gold, gold_data) == [
        "[0].nuggets[0]: has 51 alternatives (diff and same together); at most 50 are allowed"]
    gold_data = [dict(GOLD[0], nuggets=[{"text": f"x{k}", "act": "Apology"} for k in range(101)]), GOLD[1]]
    assert errors_of(load_response_gold, gold_data) == [
        "[0].nuggets: has 101 nuggets; at most 100 are allowed per item"]


def test_a_runs_nugget_work_is_budgeted_before_it_is_accepted():
    from scoring.kinds.response.formats import MAX_NUGGET_WORK, check_nugget_work, nugget_work

    gold = load_response_gold(GOLD)
    # 100 nuggets of 99 characters with 48 alternatives each: 4,901 variants of 9,900 characters.
    nuggets = [{"text": f"{k:02d}" + "b" * 97, "act": "Opinion", "same": [f"w{k}x{j}" for j in range(48)]}
               for k in range(100)]
    data = [{"id": "18", "response": "Fine."},
            {"id": "c17", "response": "".join(n["text"] for n in nuggets), "nuggets": nuggets}]
    run = load_response_run(data, gold)
    assert nugget_work(run, gold) == (4_901 * 9_900 + 3 * 5, 0)  # "Fine.": 2 sentences at most; gold row 0
    check_nugget_work(run, gold, data)  # 48.5 million: within the budget
    for nugget in nuggets:
        nugget["same"] += ["one more", "and another"]
    run = load_response_run(data, gold)
    assert nugget_work(run, gold)[0] == 5_101 * 9_900 + 15 > MAX_NUGGET_WORK == 50_000_000
    with pytest.raises(ValidationFailed) as caught:
        check_nugget_work(run, gold, data)
    assert caught.value.errors == [
        "nugget scores of this run would cover 50,499,915 characters of variant responses (per response: its "
        "length times 1 + per nugget 1 + its alternatives); at most 50,000,000 are allowed; the costliest "
        "response is [1]"]
    # A response without nuggets is counted with as many sentences as its punctuation allows (at most 100).
    plain = load_response_run([{"id": "c17", "response": "a. " * 200}, {"id": "18", "response": "Yes, fine."}], gold)
    assert nugget_work(plain, gold) == (101 * 600 + 4 * 10, 0)  # "Yes, fine.": 2 marks, 3 sentences at most
