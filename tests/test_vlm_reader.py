"""VLMReader, LLMReranker and VLMPageSummarizer over scripted in-process LlamaIndex chat LLMs:
one without a native structured form (schema in the prompt, one repair) and one with (the reply
model goes to its ``structured_predict``, no repair)."""

from __future__ import annotations

import json

import pytest
from fakes_docmemo import NativeScriptedLLM, ScriptedChatLLM
from llama_index.core.schema import NodeWithScore
from PIL import Image

from llama_index_docmemo.events import counting_llm_calls
from llama_index_docmemo.ingest.summaries import VLMPageSummarizer
from llama_index_docmemo.memory.schema import DocumentSchema
from llama_index_docmemo.nodes import node_ref, page_node
from llama_index_docmemo.postprocessors.rerank import LLMReranker, RoundQueryBundle
from llama_index_docmemo.readers.base import CropView, PageView, ReaderInput
from llama_index_docmemo.readers.vlm import VLMReader
from llama_index_docmemo.types import PageInput, PageRecord, PageRef


def ScriptedLLM(replies: list[str], max_images_per_prompt: int | None = None) -> ScriptedChatLLM:  # noqa: N802
    return ScriptedChatLLM(replies=replies, max_images_per_prompt=max_images_per_prompt)


def good(**fields) -> str:
    base = {
        "notes": [{"page": 1, "fact": "Revenue was $5M"}],
        "useful_pages": [1],
        "irrelevant_pages": [2],
        "missing": [],
        "status": "answered",
        "answer": "$5M",
        "refined_query": None,
    }
    return json.dumps({**base, **fields})


def view(n: int, image: bool = True) -> PageView:
    loader = (lambda: Image.new("RGB", (300, 400), "white")) if image else None
    return PageView(ref=PageRef("r.pdf", n), text=f"page {n} text", load_image=loader)


def round_input(n_pages: int = 2, **kw) -> ReaderInput:
    return ReaderInput(
        question="revenue?", query="revenue", pages=[view(10 + i) for i in range(n_pages)], **kw
    )


def test_one_round_maps_feedback_and_counts_one_call() -> None:
    llm = ScriptedLLM([good()])
    with counting_llm_calls() as tally:
        fb = VLMReader(llm, images=True).read(round_input())
    assert fb.useful_pages == [PageRef("r.pdf", 10)] and fb.irrelevant_pages == [
        PageRef("r.pdf", 11)
    ]
    assert fb.status == "answered" and fb.answer == "$5M" and tally.calls == 1
    assert len(llm.images(0)) == 2 and tally.images == 2
    assert "JSON schema" in llm.calls[0][0][0].content  # no native form: schema in the prompt


def test_an_llm_with_a_native_form_gets_the_reply_model_and_no_schema_in_the_prompt() -> None:
    llm = NativeScriptedLLM(replies=[good()])
    fb = VLMReader(llm, images=True).read(round_input())
    messages, kwargs = llm.calls[0]
    assert kwargs == {"schema_of": "FeedbackReply"}
    assert "JSON schema" not in messages[0].content and len(llm.images(0)) == 2
    assert fb.answer == "$5M"


def test_a_native_reply_that_does_not_validate_is_not_repaired() -> None:
    llm = NativeScriptedLLM(replies=["not json", good()])
    with counting_llm_calls() as tally:
        fb = VLMReader(llm).read(round_input())
    assert fb.status == "need_more" and fb.useful_pages == [] and tally.calls == 1


def test_malformed_reply_is_repaired_once_without_images() -> None:
    llm = ScriptedLLM(["Sure! The answer is $5M.", good()])
    with counting_llm_calls() as tally:
        fb = VLMReader(llm, images=True).read(round_input())
    assert fb.answer == "$5M" and tally.calls == 2
    repair_text = llm.calls[1][0][-1].content
    assert "no JSON object" in repair_text and "The answer is $5M" in repair_text
    assert llm.images(1) == []


def test_malformed_twice_is_a_round_without_feedback() -> None:
    llm = ScriptedLLM(["nope", '{"useful_pages": "all"}'])
    with counting_llm_calls() as tally:
        fb = VLMReader(llm).read(round_input())
    assert fb.status == "need_more" and tally.calls == 2
    assert fb.useful_pages == [] and fb.answer is None


def test_images_stay_within_the_llm_cap_pages_first() -> None:
    llm = ScriptedLLM([good()], max_images_per_prompt=3)
    crop = CropView(
        page=PageRef("r.pdf", 10),
        kind="table",
        bbox=(0, 0, 1, 1),
        load_image=lambda: Image.new("RGB", (50, 50)),
    )
    VLMReader(llm, images=True).read(round_input(5, crops=[crop]))
    images = llm.images(0)
    assert len(images) == 3 and all(
        Image.open(b.resolve_image()).size == (300, 400) for b in images
    )


def test_a_page_image_that_fails_to_load_is_sent_as_text() -> None:
    def broken():
        raise FileNotFoundError("gone.pdf")

    inp = round_input(1)
    inp.pages[0].load_image = broken
    llm = ScriptedLLM([good()])
    VLMReader(llm, images=True).read(inp)
    assert llm.images(0) == [] and "no image of this page" in llm.calls[0][0][-1].content


def test_text_only_mode_sends_no_images() -> None:
    llm = ScriptedLLM([good()])
    VLMReader(llm, images=False).read(round_input())
    assert llm.images(0) == []
    assert isinstance(llm.calls[0][0][-1].content, str)  # text blocks join: plain string content


def test_no_pages_means_no_request() -> None:
    llm = ScriptedLLM([])
    fb = VLMReader(llm).read(ReaderInput(question="q", query="q", pages=[]))
    assert fb.status == "need_more" and llm.calls == []


async def test_aread_uses_achat() -> None:
    llm = ScriptedLLM(["{bad", good(useful_pages=[2], irrelevant_pages=[])])
    with counting_llm_calls() as tally:
        fb = await VLMReader(llm).aread(round_input())
    assert fb.useful_pages == [PageRef("r.pdf", 11)] and tally.calls == 2


def candidates(n: int, summaries: bool = True) -> list[NodeWithScore]:
    records = [PageRecord("r.pdf", "v1", p, 9, f"text {p}", "") for p in range(1, n + 1)]
    return [
        NodeWithScore(node=page_node(r, summary=f"s{r.page}" if summaries else ""), score=0.5)
        for r in records
    ]


def test_reranker_orders_by_the_llm_then_fills_from_the_callers_order() -> None:
    llm = ScriptedChatLLM(replies=['{"pages": [5, 99, 5, 2]}'])
    rr = LLMReranker(llm=llm, top_n=3)
    bundle = RoundQueryBundle(query_str="q", question="the question?", missing=["segment split"])
    with counting_llm_calls() as tally:
        out = rr.postprocess_nodes(candidates(7), bundle)
    assert [node_ref(n) for n in out] == [
        PageRef("r.pdf", 5),
        PageRef("r.pdf", 2),
        PageRef("r.pdf", 1),
    ]
    assert tally.calls == 1 and tally.images == 0  # text unless told otherwise
    assert "the question?" in llm.text(0) and "segment split" in llm.text(0)
    assert "[5] r.pdf, page 5: s5" in llm.text(0)


def test_reranker_keeps_the_callers_order_when_replies_stay_malformed() -> None:
    rr = LLMReranker(llm=ScriptedChatLLM(replies=["x", "y"]), top_n=2)
    with counting_llm_calls() as tally:
        out = rr.postprocess_nodes(candidates(4, summaries=False), query_str="q")
    assert [node_ref(n) for n in out] == [PageRef("r.pdf", 1), PageRef("r.pdf", 2)]
    assert tally.calls == 2


async def test_reranker_async_path_and_prompts() -> None:
    llm = ScriptedChatLLM(replies=['{"pages": [3]}'])
    rr = LLMReranker(llm=llm, top_n=2)
    assert set(rr.get_prompts()) == {"system", "reply"}
    from llama_index.core.prompts import PromptTemplate

    rr.update_prompts({"reply": PromptTemplate('Pick {k} pages as {"pages": [...]} PLEASE')})
    out = await rr.apostprocess_nodes(candidates(4), query_str="q")
    assert [node_ref(n).page for n in out] == [3, 1]
    assert 'Pick 2 pages as {"pages": [...]} PLEASE' in llm.text(0)


def summary_reply(pages: list[int]) -> str:
    return json.dumps(
        {"summaries": [{"page": i + 1, "summary": f"about {p}"} for i, p in enumerate(pages)]}
    )


def test_summarizer_batches_pages_and_maps_numbers() -> None:
    schema = DocumentSchema(doc_id="r.pdf", doc_version="v", n_pages=5, title="Report")
    pages = [
        PageInput(
            ref=PageRef("r.pdf", n), text=f"t{n}", load_image=lambda: Image.new("RGB", (20, 20))
        )
        for n in range(1, 6)
    ]
    llm = ScriptedLLM([summary_reply([1, 2]), "garbage", "still garbage", summary_reply([5])], 2)
    out = VLMPageSummarizer(llm, images=True, batch_size=4)(schema, pages)
    assert out == {1: "about 1", 2: "about 2", 5: "about 5"}  # pages 3-4 keep the fallback
    assert len(llm.images(0)) == 2 and len(llm.calls) == 4


@pytest.mark.parametrize("with_images", [True, False])
async def test_summarizer_async(with_images: bool) -> None:
    schema = DocumentSchema(doc_id="r.pdf", doc_version="v", n_pages=2)
    pages = [PageInput(ref=PageRef("r.pdf", n), text=f"t{n}") for n in (1, 2)]
    llm = ScriptedLLM([summary_reply([1, 2])])
    summarizer = VLMPageSummarizer(llm, images=with_images)
    assert await summarizer.asummarize(schema, pages) == {1: "about 1", 2: "about 2"}
    assert summarizer.llm_calls == 1


def test_a_page_with_one_table_crop_and_full_text_sends_the_crop_instead() -> None:
    from llama_index.core.base.llms.types import ImageBlock

    from llama_index_docmemo.step_runtime import run as run_steps

    def image() -> Image.Image:
        return Image.new("RGB", (1159, 1500), "white")

    views = [
        PageView(ref=PageRef("r.pdf", n), text="word " * 300, load_image=image) for n in (1, 2)
    ]
    crop = CropView(
        PageRef("r.pdf", 2),
        "table",
        (0, 0, 1, 1),
        load_image=lambda: image().crop((0, 0, 800, 300)),
    )
    reader = VLMReader(ScriptedLLM([]), images=True)
    inp = ReaderInput(question="q", query="q", pages=views, crops=[crop])
    messages = run_steps(reader.build(inp, True))
    images = [b for b in messages[1].blocks if isinstance(b, ImageBlock)]
    assert len(images) == 2  # page 1, and page 2's crop in place of page 2
    text = "".join(getattr(b, "text", "") for b in messages[1].blocks)
    assert "[2] r.pdf, page 2\n(image: the crop of this page's table or figure below)" in text
