"""benchmarks/bench/results.py: results/<label>.json as the summary a reader uses (the
medians and the report's numbers), every measurement in results/raw/<label>/, and the
readers of every measurement (--merge, occupancy) finding it there."""

from __future__ import annotations

import json

import pytest
import run
from bench import merge, occupancy, report, results

from conftest import REPO

RESULTS = REPO / "benchmarks" / "results"


def _body(md: str) -> list[str]:
    """A report from its first scenario section on, without the chart's line."""
    starts = [md.find(h) for h in ("\n## 1.", "\n## 2.", "\n## 3.", "\n## 4.") if h in md]
    return [x for x in md[min(starts) :].splitlines() if not x.startswith("Chart:")]


@pytest.mark.parametrize(
    "label",
    ["s16-sample6-16core-c1", "light-2core-s15", "full-64core-med", "full-64core-nvcc-med"],
)
def test_a_committed_summary_gives_its_committed_report(label: str) -> None:
    summary = json.loads((RESULTS / f"{label}.json").read_text())
    assert results.is_summary(summary) and "measurements" not in summary
    assert report.render_markdown(summary) == (RESULTS / f"{label}.md").read_text()


@pytest.mark.parametrize("label", ["subset-16core"])
def test_a_committed_summary_gives_its_committed_tables(label: str) -> None:
    # Scenarios 1 to 4 (this one has them all); the head and targets of its .md are the
    # wording of the code that made it; its tables are today's rendering.
    summary = json.loads((RESULTS / f"{label}.json").read_text())
    md = (RESULTS / f"{label}.md").read_text()
    assert _body(report.render_markdown(summary)) == _body(md)
    assert {"## 1.", "## 2.", "## 3.", "## 4."} <= {x[:5] for x in _body(md)}


def _measurement(scenario: str, config: str, phase: str, repeat: int, **kw) -> dict:
    return {"scenario": scenario, "config": config, "phase": phase, "repeat": repeat} | {
        "archs": ["sm_80", "sm_90"],
        "failed": [],
        "load_before": [1.0, 1.0, 1.0],
        "load_after": [2.0, 2.0, 2.0],
        "files": {"ggml:src/ggml-cuda/a.cu": {"cpu_s": 1.0}, "ggml:src/ggml-cuda/b.cu": {}},
        **kw,
    }


def _full() -> dict:
    steps = {
        "per_arch": {"hit": 3, "miss": 1},
        "per_arch_non_cccl": {"hit": 3},
        "per_arch_no_arch_list": {"hit": 2},
        "cached": {"hit": 5, "miss": 4},
        "by_kind": {"cicc": {"hit": 2, "miss": 1}},
        "seconds_by_kind": {"cicc": 6.0, "ptxas": 2.0},
    }
    misses = [
        {"kind": "cicc", "reason": f"r{i}", "count": 20 - i, "example": "x"} for i in range(14)
    ]
    rows = [{"step": "1", "kind": "cicc", "arch": "compute_90", "seconds": "4.0"}]
    ms = []
    for r, (wall, cpu) in enumerate([(10.0, 19.0), (12.0, 21.0), (11.0, 20.0)]):
        ms += [
            _measurement("1", "nvcc", "full", r, wall_s=wall, cpu_s=cpu),
            _measurement("1", "split", "cold", r, wall_s=wall - 1, cpu_s=cpu + 1, steps=steps),
            _measurement("3", "split", "warm", r, wall_s=2.0, cpu_s=3.0, steps=steps)
            | {"explain": {"misses": misses}},
            _measurement("2", "split-j1", "critical", r, wall_s=5.0, cpu_s=5.0)
            | {"step_rows": rows, "edges": []},
        ]
    meta = {"label": "t", "machine": {"cores": 2}, "archs": ["sm_80", "sm_90"], "jobs": 2}
    return {"meta": meta, "measurements": ms}


def test_the_summary_holds_the_medians_and_renders_as_every_measurement() -> None:
    full = _full()
    summary = json.loads(results.dumps(results.summarize(full)))
    assert "measurements" not in summary and summary["repeats"] == {"1,3": 3, "2": 3}
    assert report.render_markdown(summary) == report.render_markdown(full)
    nvcc = summary["medians"][0]
    assert (nvcc["config"], nvcc["repeats"], nvcc["wall_s"], nvcc["cpu_s"]) == (
        "nvcc",
        [0, 1, 2],
        11.0,
        20.0,
    )
    assert nvcc["wall_range_s"] == [10.0, 12.0] and nvcc["files"] == 2
    assert nvcc["load_1min_before_after"] == [[1.0, 2.0]] * 3
    split = summary["medians"][1]
    assert split["seconds_by_kind"] == {"cicc": 6.0, "ptxas": 2.0}
    warm = summary["analysis"]["s3"]["split"]["warm"]
    assert len(warm["explain"]) == results.EXPLAIN_ROWS  # of 14: what the report shows
    # dumps: short objects and lists on one line, long lists wrapped.
    text = results.dumps({"a": {"b": 1}, "l": [f"item-{i:03d}" for i in range(40)]})
    assert '"a": {"b": 1}' in text and max(map(len, text.splitlines())) <= results.WIDTH
    assert json.loads(text)["l"][39] == "item-039"


def test_a_run_writes_the_summary_beside_its_raw_file_which_merge_reads(tmp_path) -> None:
    out = tmp_path / "results"
    full = _full()
    assert report.save(out, "a", full) == ""
    assert results.is_summary(json.loads((out / "a.json").read_text()))
    assert json.loads((out / "raw" / "a" / "a.json").read_text()) == full
    assert (out / "a.md").read_text() == report.render_markdown(full)
    merge.merge([str(out / "a.json")], out, "m")  # a summary: its raw file is read
    merged = json.loads((out / "raw" / "m" / "m.json").read_text())
    assert len(merged["measurements"]) == len(full["measurements"])
    assert json.loads((out / "m.json").read_text())["meta"]["merged_from"] == ["a.json"]
    # Without the raw file: where a committed result's measurements are.
    (out / "raw" / "a" / "a.json").unlink()
    for read in (
        lambda: merge.merge([str(out / "a.json")], out, "m"),
        lambda: occupancy.runs([out / "a.json"]),
    ):
        with pytest.raises(SystemExit) as e:
            read()
        assert f"git show {results.LAST_FULL}:benchmarks/results/a.json >" in str(e.value)
    (out / "x.json").write_text('{"rows": []}')
    with pytest.raises(SystemExit, match="x.json: not a `run.py compare` result"):
        results.load_full(out / "x.json")


def test_a_merge_of_unequal_repeats_counts_each_configs_builds() -> None:
    # Plain nvcc twice beside one nvcc -t (full-64core-nvcc-med): the header's "2" is not
    # every row's, so each row of scenario 1 says its number of builds.
    ms = [
        _measurement("1", "nvcc", "full", 0, wall_s=10.0, cpu_s=19.0),
        _measurement("1", "nvcc-t", "full", 0, wall_s=8.0, cpu_s=24.0),
        _measurement("1", "nvcc", "full", 1, wall_s=12.0, cpu_s=21.0),
    ]
    meta = {"label": "m", "machine": {"cores": 2}, "archs": ["sm_80", "sm_90"], "jobs": 2}
    rows = report.render_markdown({"meta": meta, "measurements": ms}).splitlines()
    assert "| nvcc | 11.0 | 20.0 | 1.000 | — | wall 10.0–12.0 |" in rows  # one run: no count
    merged = report.render_markdown(
        {"meta": meta | {"merged_from": ["a.json", "b.json"]}, "measurements": ms}
    ).splitlines()
    assert "| nvcc | 11.0 | 20.0 | 1.000 | — | 2 builds; wall 10.0–12.0 |" in merged
    assert "| nvcc-t | 8.0 | 24.0 | 1.200 | — | 1 build |" in merged
    assert any(x.startswith("- repeats measured: up to 2 (scenarios 1, 3)") for x in merged)
    assert not any("up to" in x for x in rows)


def test_run_py_summary_rewrites_a_full_result_and_keeps_it_in_raw(tmp_path) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps(_full(), indent=1) + "\n")
    before = path.read_bytes()
    assert run.main(["summary", str(path)]) == 0
    assert (tmp_path / "raw" / "b" / "b.json").read_bytes() == before
    assert json.loads(path.read_text()) == json.loads(results.dumps(results.summarize(_full())))
    assert run.main(["summary", str(path)]) == 0  # again: the raw file is left as it was
    assert (tmp_path / "raw" / "b" / "b.json").read_bytes() == before


def test_the_corpus_store_holds_exactly_the_lists_the_committed_summaries_name() -> None:
    """Each summary's long corpus lists (and those of other results that keep a run's meta,
    as `run.py team` does) are a count and a digest; results/corpus.json maps each digest
    to its list, with as many items, and holds no list none names."""
    named: set[str] = set()
    for path in RESULTS.glob("*.json"):
        doc = json.loads(path.read_text())
        if path.name == results.CORPUS_STORE or not isinstance(doc.get("meta"), dict):
            continue
        for value in doc["meta"].get("corpus", {}).values():
            if isinstance(value, dict):
                items = results.stored_list(RESULTS, value)
                assert len(items) == value["count"] and results.digest(items) == value["sha256"]
                named.add(value["sha256"])
            elif isinstance(value, list):
                assert len(value) < results.LONG_LIST, (path.name, value)
    assert set(json.loads((RESULTS / results.CORPUS_STORE).read_text())) == named


def test_a_summary_keeps_its_long_corpus_lists_in_the_store(tmp_path) -> None:
    files = [f"src/ggml-cuda/f{i}.cu" for i in range(results.LONG_LIST)]
    meta = {"label": "t", "corpus": {"ggml_files": files, "cccl_sources": files[:2]}}
    stored = results.stored_meta(meta)["corpus"]
    assert stored["cccl_sources"] == files[:2]
    assert stored["ggml_files"] == {"count": len(files), "sha256": results.digest(files)}
    results.store_lists(tmp_path, results.corpus_lists(meta))
    assert results.stored_list(tmp_path, stored["ggml_files"]) == files
    assert results.count(stored["ggml_files"]) == results.count(files) == len(files)
    # run.py summary --into: the summary, its report and the lists it names, elsewhere.
    full = _full()
    full["meta"]["corpus"] = meta["corpus"]
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "t.json").write_text(json.dumps(full))
    (tmp_path / "into").mkdir()
    assert (
        run.main(["summary", str(tmp_path / "run" / "t.json"), "--into", str(tmp_path / "into")])
        == 0
    )
    copied = json.loads((tmp_path / "into" / "t.json").read_text())
    assert results.stored_list(tmp_path / "into", copied["meta"]["corpus"]["ggml_files"]) == files
