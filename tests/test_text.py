"""The one text-normalisation module: Qdrant's BM25 analyser for words, whole numbers for values."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from llama_index_docmemo.encoders.base import Bm25Lexical
from llama_index_docmemo.text import content_words, key_of, keys, tokens, word_key


def test_inflections_share_a_key_and_stop_words_have_none() -> None:
    assert word_key("employees") == word_key("Employee") is not None
    assert word_key("started") == word_key("starts") == word_key("start")
    assert word_key("spending") != word_key("investment")  # no hand-made synonyms
    assert word_key("the") is None and word_key("which") is None
    assert word_key("of") is None and word_key("revenue") is not None
    assert word_key("x") is None  # a single letter carries no topic


def test_numbers_keep_their_value() -> None:
    assert key_of("1,184") == "1184"
    assert key_of("12.5%") == "12.5"
    assert keys("FY2015 revenue") == [word_key("FY"), "2015", word_key("revenue")]


def test_tokens_keep_offsets_and_stop_words() -> None:
    text = "The plant started on 14 March"
    toks = list(tokens(text))
    assert [t.surface for t in toks] == ["The", "plant", "started", "on", "14", "March"]
    assert all(text[t.start : t.start + len(t.surface)] == t.surface for t in toks)
    assert toks[0].key is None and toks[4].is_number
    assert content_words(text) == [
        (word_key("plant"), "plant"),
        (word_key("started"), "started"),
        (word_key("March"), "march"),
    ]


words = st.text(st.characters(whitelist_categories=("Ll", "Lu")), min_size=2, max_size=12)


@settings(max_examples=200, deadline=None)
@given(word=words)
def test_stop_words_and_stems_are_the_lexical_vectors_own(word: str) -> None:
    """One stop-word list and one stemmer: a word has a key exactly when BM25 gives it a term."""
    lexical = Bm25Lexical().embed_query(word)
    if word_key(word) is None:
        assert lexical.indices == ()
    else:
        assert len(lexical.indices) >= 1


@given(word=st.from_regex(r"[A-Za-z]{2,12}", fullmatch=True))
def test_case_does_not_change_a_key(word: str) -> None:
    assert word_key(word) == word_key(word.upper()) == word_key(word.lower())


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=200))
def test_keys_are_the_keys_of_the_tokens(text: str) -> None:
    assert keys(text) == [t.key for t in tokens(text) if t.key is not None]
