"""What the language-aware term check knows of a language (judge/languages.py): detection,
stop words, stems, and the fallbacks where a language has none of them."""

from __future__ import annotations

import pytest

from groundjudge.judge import languages
from groundjudge.judge.languages import detect, has_stemmer, is_frame, stem, stop_words


@pytest.mark.parametrize("text, expected", [
    ("Employees can carry over up to five unused leave days into the next year.", "en"),
    ("Bạn cần khai báo thu nhập trong 30 ngày từ khi nhận thông báo.", "vi"),
    ("Der Urlaubsantrag wird beim Vorgesetzten eingereicht.", "de"),
    ("La demande de congés est envoyée au responsable hiérarchique.", "fr"),
    ("纳税申报表每年提交一次。", "zh"),
])
def test_detect_names_the_language_of_a_sentence(text: str, expected: str) -> None:
    assert detect(text) == expected


def test_detect_abstains_on_too_little_text() -> None:
    assert detect("Ja.") is None and detect("") is None and detect("1040, 2024.") is None


def test_stop_words_come_from_the_maintained_lists_and_keep_number_words() -> None:
    english = stop_words("en")
    assert {"yes", "means", "get", "go", "always", "the", "of"} <= english
    assert {"bạn", "cần", "trong", "từ", "khi"} <= stop_words("vi")
    assert {"der", "die", "und"} <= stop_words("de")
    # numbers must match exactly: the number words the English list holds stay terms
    assert not {"hundred", "thousand", "million", "billion", "trillion"} & english
    assert stop_words("xx") == frozenset()  # no list: no word is dropped


def test_stems_join_the_forms_of_one_word_per_language() -> None:
    assert stem("en", "deducted") == stem("en", "deduction") == stem("en", "deductions")
    assert stem("en", "employer's") == stem("en", "employers")
    assert stem("de", "Anträge".casefold()) == stem("de", "antrag")
    assert stem("fr", "demandes") == stem("fr", "demande")
    assert stem("en", "form") != stem("en", "format")  # the five-letter prefix joined these


def test_a_language_without_a_stemmer_matches_words_exactly() -> None:
    assert not has_stemmer("vi") and not has_stemmer("zh") and has_stemmer("en")
    assert stem("vi", "thông") == "thông" and stem("xx", "words") == "words"


def test_frame_words_are_english_and_matched_by_stem() -> None:
    assert is_frame("en", "mentioned") and is_frame("en", "passages") and is_frame("en", "additionally")
    assert not is_frame("en", "bonus") and not is_frame("de", "passages")
    # what the frame list adds to the English stop list: "examples", "mentioned", "passages"
    assert not {"examples", "mentioned", "passages"} & stop_words("en")
    assert "passage" in languages.ENGLISH_FRAME
