"""One word for the reader (issue 44): the 0.2 names (``Reasoner``, ``reason()``, ``reasoner=``,
``--reasoner``, ``run.json``'s ``reasoner``) keep working for one release, each with a
DeprecationWarning, and only the deprecation shims still say "reasoner"."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes_docmemo import BagOfWordsEncoder
from stores_docmemo import StoreMaker, add_document

import llama_index_docmemo
from llama_index_docmemo import DocMemoConfig, DocMemoQueryEngine, Feedback, PageRef
from llama_index_docmemo.errors import DocMemoError
from llama_index_docmemo.evaluation.cli import eval_parser
from llama_index_docmemo.evaluation.runner import SETTINGS, check_settings, read_settings
from llama_index_docmemo.readers.base import PageView, Reader, ReaderInput
from llama_index_docmemo.readers.offline import OfflineReader
from llama_index_docmemo.readers.vlm import VLMReader
from llama_index_docmemo.step_runtime import run

PACKAGE = Path(llama_index_docmemo.__file__).parent
SHIMS = {
    "reasoning.py",  # the 0.2 module paths and class names (the package's too)
    "query_engine.py",  # reasoner= and engine.reasoner
    "evaluation/cli.py",  # --reasoner
    "evaluation/runner.py",  # a 0.2 run.json's "reasoner"
}
PAGE = PageRef("report.pdf", 1)


def reading() -> ReaderInput:
    return ReaderInput("What was revenue?", "revenue", [PageView(PAGE, "Revenue was $5.2M.")])


def test_only_the_deprecation_shims_say_reasoner() -> None:
    saying = {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if re.search("reasoner", path.read_text(encoding="utf-8"), re.IGNORECASE)
    }
    assert saying == SHIMS
    assert not (PACKAGE / "reasoning").exists()  # one module, not the 0.2 package


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Reasoner", Reader),
        ("ReasoningInput", ReaderInput),
        ("OfflineReasoner", OfflineReader),
        ("VLMReasoner", VLMReader),
    ],
)
def test_the_packages_0_2_class_names_warn_and_are_the_new_classes(old: str, new: type) -> None:
    with pytest.warns(DeprecationWarning, match=rf"reasoning\.{old} is deprecated") as caught:
        assert getattr(llama_index_docmemo, old) is new
    assert caught[0].filename == __file__  # points at the caller's line
    with pytest.warns(DeprecationWarning):
        assert getattr(llama_index_docmemo, old) is new  # every use warns (never cached)
    assert old not in llama_index_docmemo.__all__ and old not in dir(llama_index_docmemo)


def test_the_0_2_module_paths_still_import_with_a_warning() -> None:
    with pytest.warns(DeprecationWarning, match=r"use llama_index_docmemo\.readers\.base\.Reader "):
        from llama_index_docmemo.reasoning.base import PageView as OldPageView
        from llama_index_docmemo.reasoning.base import Reasoner, ReasoningInput
    assert (Reasoner, ReasoningInput, OldPageView) == (Reader, ReaderInput, PageView)
    with pytest.warns(DeprecationWarning, match=r"readers\.offline\.OfflineReader"):
        from llama_index_docmemo.reasoning.offline import OfflineReasoner
    with pytest.warns(DeprecationWarning, match=r"readers\.vlm\.VLMReader"):
        from llama_index_docmemo.reasoning.vlm import VLMReasoner
    assert (OfflineReasoner, VLMReasoner) == (OfflineReader, VLMReader)
    with pytest.raises(ImportError):
        from llama_index_docmemo.reasoning import NoSuchName  # noqa: F401


class Labels(Reader):
    """A reader written against 0.3."""

    def read(self, inp: ReaderInput) -> Feedback:
        return Feedback(useful_pages=[p.ref for p in inp.pages], status="need_more")


def test_the_0_2_method_names_warn_and_read() -> None:
    reader = Labels()
    with pytest.warns(DeprecationWarning, match=r"Labels\.reason\(\) is deprecated: call read"):
        assert reader.reason(reading()) == reader.read(reading())
    with pytest.warns(DeprecationWarning, match=r"Labels\.areason\(\) is deprecated: call aread"):
        assert asyncio.run(reader.areason(reading())) == reader.read(reading())


def test_a_0_2_subclass_overriding_reason_and_calling_its_base_still_reads() -> None:
    with pytest.warns(DeprecationWarning, match="Answers overrides reason, the reader's 0.2"):

        class Answers(Labels):
            def reason(self, inp: ReaderInput) -> Feedback:  # 0.2: super().reason, not read
                labels = super().reason(inp)
                return labels.model_copy(update={"answer": "$5.2M", "status": "answered"})

    reader = Answers()
    expected = Feedback(answer="$5.2M", useful_pages=[PAGE], status="answered")
    assert reader.read(reading()) == expected  # the loop's call reaches the 0.2 override
    assert run(reader.read_steps(reading())) == expected
    assert asyncio.run(reader.aread(reading())) == expected


def test_a_0_2_subclass_of_the_base_class_and_its_steps_method_are_mapped() -> None:
    with pytest.warns(DeprecationWarning, match="Plain overrides reason, areason"):

        class Plain(Reader):  # 0.2: Reasoner with reason abstract, an own async twin
            def reason(self, inp: ReaderInput) -> Feedback:
                return Feedback(answer="sync", status="answered")

            async def areason(self, inp: ReaderInput) -> Feedback:
                return Feedback(answer="async", status="answered")

    assert Plain().read(reading()).answer == "sync"
    assert asyncio.run(Plain().aread(reading())).answer == "async"


class Model(Reader):
    """A 0.3 reader that talks to a model: its reading is steps."""

    def read_steps(self, inp: ReaderInput):
        labels = yield from Labels.read_steps(Labels(), inp)
        return labels.model_copy(update={"answer": "model"})

    def read(self, inp: ReaderInput) -> Feedback:
        return run(self.read_steps(inp))


def test_a_0_2_steps_method_is_mapped_onto_read_steps() -> None:
    with pytest.warns(DeprecationWarning, match="Stepped overrides read, the reader's 0.2"):

        class Stepped(Model):  # 0.2: the steps method was called read
            def read(self, inp: ReaderInput):
                feedback = yield from Model.read_steps(self, inp)
                return feedback.model_copy(update={"status": "answered"})

    expected = Feedback(answer="model", useful_pages=[PAGE], status="answered")
    assert Stepped().read(reading()) == expected  # Model.read runs the 0.2 steps
    assert asyncio.run(Stepped().aread(reading())) == expected


def test_a_0_2_reader_with_both_steps_and_reason_is_told_what_to_rename() -> None:
    with pytest.raises(TypeError, match="rename read to read_steps and reason to read"):

        class Both(Reader):  # noqa: F841 (0.2: reason ran self.read, the steps)
            def read(self, inp: ReaderInput):
                return (yield from Labels().read_steps(inp))

            def reason(self, inp: ReaderInput) -> Feedback:
                return run(self.read(inp))


@pytest.fixture(scope="module")
def store(store_maker: StoreMaker) -> Iterator[object]:
    shared = store_maker.open("edge")
    add_document(shared, "report.pdf", ["Revenue was $5.2M.", "Weather and office plants."])
    yield shared
    shared.close()


def engine(store: object, **reader: object) -> DocMemoQueryEngine:
    return DocMemoQueryEngine.from_defaults(
        store=store,  # type: ignore[arg-type]
        encoder=BagOfWordsEncoder(),
        config=DocMemoConfig(pages_per_round=2, rounds=1),
        evidence_images=False,
        **reader,  # type: ignore[arg-type]
    )


def test_the_engines_reasoner_argument_and_attribute_warn_and_work(store: object) -> None:
    reader = Labels()
    with pytest.warns(DeprecationWarning, match="reasoner= is deprecated: pass reader=") as caught:
        built = engine(store, reasoner=reader)
    assert caught[0].filename == __file__
    assert built.reader is reader
    with pytest.warns(DeprecationWarning, match=r"\.reasoner is deprecated: use \.reader"):
        assert built.reasoner is reader
    assert PAGE in {PageRef(p.doc_id, p.page) for p in built.run("revenue").trace.pages_read}
    with pytest.warns(DeprecationWarning, match="reasoner= is deprecated"):
        direct = DocMemoQueryEngine(built.retriever, reasoner=reader)
    assert direct.reader is reader


def test_the_engine_refuses_a_reader_under_both_names(store: object) -> None:
    with pytest.raises(TypeError, match="give reader= or its deprecated 0.2 name reasoner="):
        engine(store, reader=Labels(), reasoner=Labels())
    built = engine(store, reader=Labels())
    with pytest.raises(TypeError, match="give reader= or its deprecated 0.2 name reasoner="):
        DocMemoQueryEngine(built.retriever, Labels(), reasoner=Labels())
    with pytest.raises(TypeError, match="takes a reader, not readr"):
        DocMemoQueryEngine(built.retriever, readr=Labels())


def test_the_eval_commands_reasoner_flag_is_a_hidden_deprecated_reader(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = ["--data", "d", "--out", "o"]
    assert eval_parser().parse_args([*base, "--reader", "simulated"]).reader == "simulated"
    assert capsys.readouterr().err == ""
    args = eval_parser().parse_args([*base, "--reasoner", "simulated"])
    assert args.reader == "simulated" and not hasattr(args, "reasoner")
    assert "--reasoner is deprecated, use --reader" in capsys.readouterr().err
    assert eval_parser().parse_args(base).reader == "offline"
    helped = eval_parser().format_help()
    assert "--reader " in helped and "--reasoner" not in helped


def test_a_0_2_run_json_still_guards_its_folder(tmp_path: Path) -> None:
    old = {"dataset": "/d", "split": "tune", "reasoner": "simulated", "k": 5, "seed": 0}
    (tmp_path / SETTINGS).write_text(json.dumps(old), encoding="utf-8")
    assert read_settings(tmp_path / SETTINGS)["reader"] == "simulated"
    with pytest.raises(DocMemoError, match=r"different reader\)"):
        check_settings(tmp_path, {"reader": "offline", "k": 5})
    check_settings(tmp_path, {"reader": "simulated", "k": 5})  # the same run resumes
    written = json.loads((tmp_path / SETTINGS).read_text(encoding="utf-8"))
    assert written["reader"] == "simulated" and "reasoner" not in written
