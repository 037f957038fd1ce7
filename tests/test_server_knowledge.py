"""The wiki, the GPU memory tools and the experiment records over the server."""

from __future__ import annotations

import pytest
from test_server_support import call, jp_server_config, llm, refusal  # noqa: F401  (fixtures)

from betty_jupyter.wiki import WikiStore

pytestmark = pytest.mark.cluster


async def test_wiki_pages_a_page_and_a_search(jp_fetch, jp_root_dir):
    pages = (await call(jp_fetch, "GET", "wiki"))["pages"]
    store = WikiStore(jp_root_dir / "wiki")
    assert [p["name"] for p in pages] == [p.name for p in store.list()]
    index = next(p for p in pages if p["name"] == "index.md")
    assert index["title"] == store.read("index.md").frontmatter["name"]

    page = await call(jp_fetch, "GET", "wiki", "page", params={"name": "index.md"})
    assert page == {"name": "index.md", "text": (jp_root_dir / "wiki" / "index.md").read_text()}

    found = await call(jp_fetch, "GET", "wiki", "search", params={"q": "dev cluster"})
    expected = [p.name for p in store.search("dev cluster")]
    assert found["ok"] and expected and all(name in found["summary"] for name in expected)
    nothing = await call(jp_fetch, "GET", "wiki", "search", params={"q": "zebra-quartz-unfindable"})
    assert nothing["ok"] and not any(name in nothing["summary"] for name in expected)


@pytest.mark.parametrize(("name", "status", "expected"), [
    ("../../etc/passwd", 400, "it contains '..'; a page must stay inside the wiki"),
    ("/etc/passwd", 400, "it is an absolute path"),
    ("notes/not-there.md", 404, "there is no wiki page 'notes/not-there.md'"),
])
async def test_a_page_outside_the_wiki_or_missing_is_refused_with_one_line(jp_fetch, name, status, expected):
    code, error = await refusal(jp_fetch, "GET", "wiki", "page", params={"name": name})
    assert code == status and expected in error


async def test_a_page_request_without_a_name_says_how(jp_fetch):
    assert await refusal(jp_fetch, "GET", "wiki", "page") == (400, "say which page: ?name=clusters/dev-cluster.md")


async def test_gpu_models_estimate_and_advice(jp_fetch):
    models = (await call(jp_fetch, "GET", "gpu", "models"))["models"]
    llama = next(m for m in models if m["name"] == "Llama-3.1-8B")
    assert llama["layers"] == 32 and llama["kv_heads"] == 8 and 7.9e9 < llama["params"] < 8.1e9

    shape = {"model": "Llama-3.1-8B", "method": "qlora", "seq_len": 2048}
    estimate = await call(jp_fetch, "POST", "gpu", "estimate", body={**shape, "gpu": "a100-80gb"})
    assert estimate["ok"] and estimate["data"]["kind"] == "json" and "fits" in estimate["summary"]
    assert 0 < estimate["data"]["value"]["peak_gib"] < 80
    advice = await call(jp_fetch, "POST", "gpu", "advise", body={**shape, "gpu_types": ["a100-80gb"]})
    assert advice["ok"] and "a100" in advice["summary"].lower()
    code, error = await refusal(jp_fetch, "POST", "gpu", "estimate", body={**shape, "method": "magic"})
    assert code == 400 and error.startswith("some values are missing or wrong — method:")


async def test_no_experiments_yet(jp_fetch):
    assert await call(jp_fetch, "GET", "experiments") == {"experiments": []}
    code, error = await refusal(jp_fetch, "GET", "experiments", "2026-01-01-nothing")
    assert code == 404 and "no experiment '2026-01-01-nothing'" in error


async def test_a_pipeline_graph_of_what_is_no_pipeline_is_refused_with_one_line(jp_fetch):
    code, error = await refusal(jp_fetch, "GET", "experiments", "2026-01-01-nothing", "pipeline")
    assert code == 404 and error.startswith("no pipeline '2026-01-01-nothing' is recorded in ")
