"""Who holds what LLM servers taught: an LLM, a reader or an engine; never the process (pure)."""

from __future__ import annotations

import importlib
import pickle
import pkgutil

import pytest
from fakes_docmemo import BagOfWordsEncoder
from llama_index.core.llms import MockLLM
from stores_docmemo import client_store

import llama_index_docmemo
from llama_index_docmemo import OpenAICompatible
from llama_index_docmemo.config import DocMemoConfig
from llama_index_docmemo.llms.servers import ServerFacts, ServerMemory, memory_for
from llama_index_docmemo.llms.vision import decide_images
from llama_index_docmemo.postprocessors.rerank import LLMReranker
from llama_index_docmemo.query_engine import DocMemoQueryEngine
from llama_index_docmemo.readers.vlm import VLMReader

URL = "http://127.0.0.1:9/v1"  # never contacted: nothing here sends a request


class NamedServerLLM(MockLLM):
    """A non-OpenAICompatible LLM naming a server (as OpenAILike or Ollama do)."""

    api_base: str = URL
    model: str = "text-model"


def engine(llm, **kwargs) -> DocMemoQueryEngine:
    return DocMemoQueryEngine.from_defaults(
        store=client_store(),  # never searched: nothing here sends a request
        encoder=BagOfWordsEncoder(),
        llm=llm,
        config=DocMemoConfig(llm_rerank=True),
        evidence_images=False,
        **kwargs,
    )


def test_no_module_of_the_package_holds_a_server_memory() -> None:
    for info in pkgutil.walk_packages(llama_index_docmemo.__path__, "llama_index_docmemo."):
        if info.name.endswith("__main__"):  # runs the command line
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra that is not installed here
            continue
        held = [name for name, value in vars(module).items() if isinstance(value, ServerMemory)]
        assert held == [], f"{info.name} holds a process-wide server memory: {held}"


def test_each_llm_has_its_own_memory_unless_given_one() -> None:
    first, second = OpenAICompatible(URL, "m"), OpenAICompatible(URL, "m")
    first.server_memory.update(first.server, refuses_images=True)
    assert not second.server_memory.get(second.server).refuses_images  # learnt apart
    shared = ServerMemory()
    one, other = (OpenAICompatible(URL, "m", server_memory=shared) for _ in range(2))
    one.server_memory.update(one.server, refuses_images=True)
    assert other.server_memory.get(other.server).refuses_images  # learnt once for both
    assert decide_images(other, "auto").send is False  # its readers know it too


def test_readers_of_an_openai_compatible_share_its_memory() -> None:
    llm = OpenAICompatible(URL, "m")
    assert VLMReader(llm).server_memory is llm.server_memory
    assert LLMReranker(llm=llm).server_memory is llm.server_memory
    assert memory_for(llm, llm.server_memory) is llm.server_memory
    with pytest.raises(ValueError, match="keeps its own server memory.*server_memory="):
        VLMReader(llm, server_memory=ServerMemory())


def test_readers_of_other_llms_hold_their_own_memory_or_the_one_given() -> None:
    llm = NamedServerLLM()
    first, second = VLMReader(llm), VLMReader(llm)
    assert first.server_memory is not second.server_memory
    first.server_memory.update(f"{URL}#text-model", refuses_images=True)
    assert first.images_now().send is False  # "auto" after the refusal
    assert decide_images(llm, "auto", second.server_memory).reason.startswith("NamedServerLLM")
    shared = ServerMemory()
    assert VLMReader(llm, server_memory=shared).server_memory is shared
    assert LLMReranker(llm=llm, server_memory=shared).server_memory is shared


@pytest.mark.parametrize("make_llm", [NamedServerLLM, lambda: OpenAICompatible(URL, "m")])
def test_an_engine_gives_its_reader_and_reranker_one_memory(make_llm) -> None:
    llm = make_llm()
    built = engine(llm)
    reader, reranker = built.reader, built.retriever.reranker
    assert isinstance(reader, VLMReader) and isinstance(reranker, LLMReranker)
    assert reader.server_memory is reranker.server_memory
    if isinstance(llm, OpenAICompatible):
        assert reader.server_memory is llm.server_memory


def test_engines_learn_apart_unless_the_app_shares_a_memory() -> None:
    llm = NamedServerLLM()
    assert engine(llm).reader.server_memory is not engine(llm).reader.server_memory
    shared = ServerMemory()
    engines = [engine(llm, server_memory=shared) for _ in range(2)]
    assert all(e.reader.server_memory is shared for e in engines)
    assert all(e.retriever.reranker.server_memory is shared for e in engines)


def test_a_pickled_llm_takes_what_was_learnt_and_learns_on_its_own() -> None:
    llm = OpenAICompatible(URL, "m")
    llm.server_memory.update(llm.server, structured_mode="json_object")
    shipped = pickle.loads(pickle.dumps(llm))  # a worker process summarising pages
    assert shipped.server_memory.get(shipped.server).structured_mode == "json_object"
    shipped.server_memory.update(shipped.server, refuses_images=True)
    assert not llm.server_memory.get(llm.server).refuses_images


def test_the_least_recently_used_server_is_forgotten_first() -> None:
    memory = ServerMemory(capacity=2)
    memory.update("a", context_window=1)
    memory.update("b", context_window=2)
    assert memory.get("a").context_window == 1  # a read refreshes "a"
    memory.update("c", context_window=3)
    assert memory.get("b") == ServerFacts()  # "b" was the least recently used
    assert (memory.get("a").context_window, memory.get("c").context_window) == (1, 3)
    memory.update("a", refuses_images=True)  # an update refreshes and keeps the other facts
    memory.update("d", context_window=4)
    assert memory.get("a") == ServerFacts(context_window=1, refuses_images=True)
    assert memory.get("c") == ServerFacts()


def test_forget_one_server_or_all_and_capacity_must_be_positive() -> None:
    memory = ServerMemory()
    memory.update("a", context_window=1)
    memory.update("b", context_window=2)
    memory.forget("a")
    memory.forget("never there")
    assert memory.get("a") == ServerFacts() and memory.get("b").context_window == 2
    memory.forget()
    assert memory.get("b") == ServerFacts()
    with pytest.raises(ValueError, match="capacity"):
        ServerMemory(capacity=0)


def test_a_pickled_memory_keeps_what_was_learnt_in_its_order_of_use() -> None:
    memory = ServerMemory(capacity=2)
    memory.update("a", context_window=1)
    memory.update("b", context_window=2)
    memory.get("a")  # "b" is the least recently used
    copy = pickle.loads(pickle.dumps(memory))
    assert copy.get("a").context_window == 1
    copy.update("c", context_window=3)
    assert copy.get("b") == ServerFacts() and copy.get("c").context_window == 3
    assert memory.get("b").context_window == 2  # the original is untouched
    copy.update("a", refuses_images=True)  # the copy has a working lock of its own
    assert copy.get("a").refuses_images
