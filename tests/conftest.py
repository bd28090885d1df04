"""Fixtures of the unit tests: the real page stores the engine's tests run on."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from stores_docmemo import BACKENDS, StoreMaker

from llama_index_docmemo.store import PageStore


@pytest.fixture(scope="session")
def store_maker(tmp_path_factory: pytest.TempPathFactory) -> StoreMaker:
    """Opens empty stores of either backend (Edge ones copied from one made once)."""
    return StoreMaker(tmp_path_factory.mktemp("stores"))


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend a module's engine tests run on: each runs once on Edge, once on the client's
    local mode (module-scoped, so a module's shared stores are made once per backend)."""
    return request.param


@pytest.fixture
def open_store(store_maker: StoreMaker, backend: str) -> Iterator[Callable[[], PageStore]]:
    """Opens fresh empty stores of the test's backend, for tests that change what is stored;
    closes them after the test."""
    opened: list[PageStore] = []

    def factory() -> PageStore:
        opened.append(store_maker.open(backend))
        return opened[-1]

    yield factory
    for store in opened:
        store.close()
