"""Image sizing for the reading LLM: family from the model, budget, crops, format, estimate."""

from __future__ import annotations

import random

from llama_index.core.base.llms.types import ChatMessage, ImageBlock, TextBlock
from llama_index.llms.openai import OpenAI
from PIL import Image

from llama_index_docmemo.llms import QwenVL
from llama_index_docmemo.llms.image_policy import LADDER, MIN_LONG_SIDE, image_tokens
from llama_index_docmemo.llms.images import (
    PAGE_SIZE,
    ImageSizing,
    _encode,
    block_size,
    crop_sizing,
    encode_image,
    load_blocks,
    request_image_tokens,
    sizing_for,
)


def decoded(block: ImageBlock) -> Image.Image:
    image = Image.open(block.resolve_image())
    image.load()
    return image


def test_the_sizing_follows_the_llm_s_model_and_server_cap() -> None:
    assert sizing_for(OpenAI(model="gpt-4o", api_key="sk")) == ImageSizing("openai")
    qwen = QwenVL(api_base="http://x/v1", max_image_side=1000, image_format="PNG")
    assert sizing_for(qwen, 500) == ImageSizing("qwen-vl", 500, 1000, "PNG")
    # no image costs more than the window budget counts it as (tokens_per_image)
    assert sizing_for(QwenVL(api_base="http://x/v1")).max_tokens == 2048


def test_a_page_for_gpt4o_is_jpeg_at_high_detail_s_own_size() -> None:
    block = encode_image(Image.new("RGB", (1159, 1500), "white"), ImageSizing("openai"))
    image = decoded(block)
    assert block.image_mimetype == "image/jpeg" and image.format == "JPEG"
    assert image.size == (768, 993)


def test_a_token_budget_shrinks_the_image() -> None:
    sized = decoded(encode_image(Image.new("RGB", PAGE_SIZE), ImageSizing("openai", 255)))
    assert max(sized.size) == 512 and image_tokens("openai", *sized.size) == 255


def test_a_crop_costs_at_most_a_page() -> None:
    band = (1454, 703)  # a table's band of a page at 200 dpi: 6 tiles for gpt-4o
    page = ImageSizing("openai")
    assert image_tokens("openai", *page.size(*band)) == 1105
    crop = crop_sizing(page)
    assert crop.max_tokens == 765 == image_tokens("openai", *page.size(*PAGE_SIZE))
    assert image_tokens("openai", *crop.size(*band)) <= 765
    assert crop_sizing(ImageSizing("openai", 425)).max_tokens == 425  # a lower budget stays


def test_the_server_cap_holds_where_qwen_rounds_up_to_its_patch() -> None:
    size = ImageSizing("qwen-vl", max_side=500).size(1000, 800)
    assert max(size) <= 500 and size[0] % 28 == 0 and size[1] % 28 == 0


def test_transparency_is_flattened_onto_white() -> None:
    clear = Image.new("RGBA", (40, 40), (0, 0, 0, 0))
    image = decoded(encode_image(clear, ImageSizing(image_format="PNG")))
    assert image.mode == "RGB" and image.getpixel((5, 5)) == (255, 255, 255)


def test_image_tokens_of_a_request_follow_the_model_family() -> None:
    page = encode_image(Image.new("RGB", (1159, 1500)), ImageSizing("openai"))
    remote = ImageBlock(url="https://example.com/a.png")
    messages = [ChatMessage(role="user", blocks=[TextBlock(text="read"), page, page, remote])]
    assert block_size(page) == (768, 993) and block_size(remote) is None
    assert request_image_tokens(messages, "gpt-4o") == 2 * 765
    assert request_image_tokens(messages, "Qwen/Qwen2.5-VL-7B-Instruct") == 2 * 27 * 35


def noise(width: int, height: int, seed: int) -> Image.Image:
    """An image JPEG cannot squeeze (random pixels): its bytes grow with its pixels."""
    return Image.frombytes(
        "RGB", (width, height), random.Random(seed).randbytes(width * height * 3)
    )


def sent(blocks: dict[str, ImageBlock]) -> dict[str, int]:
    return {key: len(block.image or b"") for key, block in blocks.items()}


def test_without_a_byte_budget_every_image_goes_as_encode_image_sends_it() -> None:
    sizing = ImageSizing("openai")
    images = {"a": noise(1159, 1500, 1), "b": noise(600, 400, 2)}
    blocks = load_blocks({k: (sizing, lambda i=i: i) for k, i in images.items()})
    assert sent(blocks) == {k: len(encode_image(i, sizing).image or b"") for k, i in images.items()}


def test_a_byte_budget_shrinks_the_largest_image_and_keeps_the_sum_within_it() -> None:
    page, crop = ImageSizing("openai"), crop_sizing(ImageSizing("openai"))
    images = {
        "page": (page, lambda: noise(1159, 1500, 1)),
        "small": (page, lambda: noise(500, 400, 2)),
        "crop": (crop, lambda: noise(1454, 703, 3)),
    }
    full = sent(load_blocks(images))
    budget = sum(full.values()) - full["page"] // 4
    blocks = load_blocks(images, budget)
    assert sum(sent(blocks).values()) <= budget
    assert sent(blocks)["page"] < full["page"] and sent(blocks)["small"] == full["small"]
    assert decoded(blocks["small"]).size == (500, 400)
    # what is sent is what the request's token estimate reads
    sizes = [decoded(b).size for b in blocks.values()]
    message = ChatMessage(role="user", blocks=list(blocks.values()))
    assert request_image_tokens([message], "gpt-4o") == sum(
        image_tokens("openai", *s) for s in sizes
    )


def test_past_the_floor_the_last_images_are_left_out_and_the_long_side_stays_above_it() -> None:
    sizing = ImageSizing("openai")
    images = {k: (sizing, lambda k=k: noise(1159, 1500, k)) for k in range(3)}
    assert load_blocks({0: images[0]}, 1) == {}  # one image at the floor: nothing fits 1 byte
    at_floor = len(_encode(noise(1159, 1500, 0), sizing, LADDER[-1]).image or b"")
    one = load_blocks(images, at_floor * 3 // 2)  # room for one at the floor, not two
    assert list(one) == [0] and sent(one)[0] == at_floor
    assert max(decoded(one[0]).size) >= MIN_LONG_SIDE


def test_an_image_that_cannot_be_loaded_is_left_out_and_the_rest_go() -> None:
    def broken() -> Image.Image:
        raise OSError("cannot render")

    sizing = ImageSizing("openai")
    blocks = load_blocks({"bad": (sizing, broken), "good": (sizing, lambda: noise(300, 200, 1))})
    assert list(blocks) == ["good"]
