"""The languages of response tasks: one home for every rule that follows from a task's ``language``
(RESPONSE-SPEC.md, "Languages"; issues 27, 37 and 42).

- **English, Chinese, Japanese** (``MAIN``): sacrebleu's own tokeniser of the language (``13a``,
  ``zh``, ``ja-mecab``), a POS tagger with word vectors for POSSCORE (``en_core_web_md``; jieba with
  the shipped encoder's word vectors; GiNZA), and BERTScore over multilingual-e5-small. BERTScore is
  on by default for Chinese and Japanese (the encoder is multilingual and the sentence-level
  measures are what those languages lack most); English keeps it opt-in (``response-bertscore``),
  as before.
- **Any other language** of ``OTHER`` (multilingual-e5-small's languages that a shared task is likely
  to use): BLEU and deltaBLEU with sacrebleu's ``char`` tokeniser for a script written without
  spaces (Thai, Lao, Khmer, Burmese: a language that no word tokeniser on the registry segments
  without a download) and ``intl`` otherwise; BERTScore with the multilingual encoder. POSSCORE is
  refused: it needs a part-of-speech tagger and word vectors of the language, and none ships with
  the server (a task may still name an installed spaCy pipeline of the language in ``pipeline``).
  Nugget scores use deltaBLEU, and their sentence fallback spaCy's rule-based sentencizer.

``measure_support(code)`` says per measure whether it is valid in a language and why: the measures
page shows it, and ``parse_config`` refuses a configuration that asks for a refused one.
"""

from __future__ import annotations

from typing import Any

from scoring.kinds.response.nlp import DEFAULT_PIPELINE, SENTENCES_ONLY, ZH_JIEBA

MAIN: dict[str, dict[str, str]] = {
    "en": {"name": "English", "tokenizer": "13a", "pipeline": DEFAULT_PIPELINE},
    "zh": {"name": "Chinese", "tokenizer": "zh", "pipeline": ZH_JIEBA},
    "ja": {"name": "Japanese", "tokenizer": "ja-mecab", "pipeline": "ja_ginza"},
}
# code: (name, sacrebleu tokeniser, written in Latin letters)
OTHER: dict[str, tuple[str, str, bool]] = {
    "ar": ("Arabic", "intl", False), "bn": ("Bengali", "intl", False), "cs": ("Czech", "intl", True),
    "da": ("Danish", "intl", True), "de": ("German", "intl", True), "el": ("Greek", "intl", False),
    "es": ("Spanish", "intl", True), "fa": ("Persian", "intl", False), "fi": ("Finnish", "intl", True),
    "fr": ("French", "intl", True), "he": ("Hebrew", "intl", False), "hi": ("Hindi", "intl", False),
    "hu": ("Hungarian", "intl", True), "id": ("Indonesian", "intl", True), "it": ("Italian", "intl", True),
    "km": ("Khmer", "char", False), "ko": ("Korean", "intl", False), "lo": ("Lao", "char", False),
    "ms": ("Malay", "intl", True), "my": ("Burmese", "char", False), "nl": ("Dutch", "intl", True),
    "no": ("Norwegian", "intl", True), "pl": ("Polish", "intl", True), "pt": ("Portuguese", "intl", True),
    "ro": ("Romanian", "intl", True), "ru": ("Russian", "intl", False), "sv": ("Swedish", "intl", True),
    "ta": ("Tamil", "intl", False), "th": ("Thai", "char", False), "tr": ("Turkish", "intl", True),
    "uk": ("Ukrainian", "intl", False), "vi": ("Vietnamese", "intl", True),
}
LANGUAGES: dict[str, dict[str, str]] = {
    **MAIN,
    **{code: {"name": name, "tokenizer": tokenizer, "pipeline": SENTENCES_ONLY}
       for code, (name, tokenizer, _) in sorted(OTHER.items())},
}
# The measures a task of the language reports when its configuration names none.
DEFAULT_MEASURES: dict[str, tuple[str, ...]] = {
    "en": ("bleu", "delta_bleu", "posscore"),
    "zh": ("bleu", "delta_bleu", "posscore", "bertscore"),
    "ja": ("bleu", "delta_bleu", "posscore", "bertscore"),
}
OTHER_MEASURES: tuple[str, ...] = ("bleu", "delta_bleu", "bertscore")


def name(code: str) -> str:
    return LANGUAGES[code]["name"]


def vectors_words(pipeline: str, vectors: str, vectors_name: str) -> str:
    """A task's POSSCORE word vectors in a reader's words."""
    if vectors != "pipeline":
        return f"the uploaded table {vectors_name or vectors[:12]}"
    if pipeline == ZH_JIEBA:
        return "multilingual-e5-small's input embeddings, averaged over each word's pieces"
    return "the pipeline's"


# A reply of two nuggets (an apology, a recommendation) for the run format's example entry.
EXAMPLE_REPLIES: dict[str, tuple[str, str]] = {
    "en": ("Sorry to hear that.", "Have you tried restarting it?"),
    "zh": ("很抱歉给您带来不便。", "请先重启一下路由器试试。"),
    "ja": ("ご不便をおかけして申し訳ございません。", "ルーターを再起動してみてください。"),
}


def example_reply(code: str) -> tuple[str, str, str]:
    """The example's response and its two nuggets in the language (English for a language without
    one here); Chinese and Japanese put sentences together without a space."""
    first, second = EXAMPLE_REPLIES.get(code, EXAMPLE_REPLIES["en"])
    return (first + second if code in ("zh", "ja") else f"{first} {second}"), first, second


def default_measures(code: str) -> tuple[str, ...]:
    return DEFAULT_MEASURES.get(code, OTHER_MEASURES)


def script_class(code: str) -> str | None:
    """Which class of ``compiled.text_language`` a text of the language falls in: its own for the
    main three, "en" (Latin words) for a language written in Latin letters, None for another script
    (Hangul, Thai, Cyrillic...: none of the classes)."""
    if code in MAIN:
        return code
    return "en" if OTHER[code][2] else None


def posscore_refusal(code: str, pipeline: str, label: str | None = None) -> str | None:
    """Why POSSCORE cannot be computed in the language with this pipeline, or None (``label``: how
    to name the language, default its name)."""
    if code in MAIN or pipeline != SENTENCES_ONLY:
        return None
    return (f"POSSCORE needs a part-of-speech tagger and word vectors of {label or name(code)}, and none ships "
            "with the server (no such package on the registry): leave it out, or name an installed spaCy "
            "pipeline of the language in \"pipeline\"")


TOKENIZER_WORDS = {"13a": "sacrebleu's 13a tokens (words and punctuation)",
                   "zh": "sacrebleu's zh tokens (every Chinese character a token)",
                   "ja-mecab": "sacrebleu's ja-mecab tokens (MeCab with IPAdic)",
                   "char": "sacrebleu's char tokens (every character a token: the script has no spaces between words)",
                   "intl": "sacrebleu's intl tokens (words and punctuation by Unicode classes)"}


def measure_support(code: str, label: str | None = None) -> list[dict[str, Any]]:
    """Per measure, for a task of the language: ``{"measure", "valid", "why"}`` in a reader's words
    (``label``: how to name the language, default its name)."""
    spec = LANGUAGES[code]
    tokens = TOKENIZER_WORDS[spec["tokenizer"]]
    rows = [{"measure": "BLEU and deltaBLEU", "valid": True, "why": tokens}]
    if code == "en":
        why = "tags and word vectors of spaCy's en_core_web_md"
    elif code == "zh":
        why = ("jieba's words and tags mapped to Universal POS, with word vectors from multilingual-e5-small's input "
               "embeddings (or a table the organisers upload)")
    elif code == "ja":
        why = "GiNZA's tags and word vectors"
    else:
        why = None
    rows.append({"measure": "POSSCORE", "valid": why is not None,
                 "why": why or posscore_refusal(code, SENTENCES_ONLY, label)})
    rows.append({"measure": "BERTScore (and vBERTScore)", "valid": True,
                 "why": "multilingual-e5-small's token vectors (about 100 languages)"
                        + ("; on by default" if "bertscore" in default_measures(code) else
                           "; opt-in (preset response-bertscore)")})
    return rows


def presets(base: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The response kind's presets per main language from its default configuration ``base``
    (English), each with its default measures, and the same with BERTScore (``*-bertscore``, kept
    for the tasks and commands that name them). Another language is declared with ``"language"`` in
    a configuration, whose defaults follow from it."""
    made: dict[str, dict[str, Any]] = {}
    for code in MAIN:
        measures = list(default_measures(code))
        preset = {**base, "language": code, "pipeline": MAIN[code]["pipeline"], "measures": measures,
                  "official": measures}
        made["response" if code == "en" else f"response-{code}"] = preset
        with_bertscore = measures if "bertscore" in measures else [*measures, "bertscore"]
        made["response-bertscore" if code == "en" else f"response-{code}-bertscore"] = {
            **preset, "measures": with_bertscore, "official": with_bertscore}
    return made


def language_support() -> list[dict[str, Any]]:
    """What the measures page shows: the main three one by one, then the other languages grouped by
    tokeniser (their measures differ in nothing else): ``[{"languages", "measures"}]``."""
    groups = [{"languages": f"{name(code)} ({code})", "measures": measure_support(code)} for code in MAIN]
    for tokenizer in ("char", "intl"):
        codes = sorted((code for code, spec in OTHER.items() if spec[1] == tokenizer), key=lambda code: OTHER[code][0])
        groups.append({"languages": ", ".join(f"{name(code)} ({code})" for code in codes),
                       "measures": measure_support(codes[0], "the language")})
    return groups
