"""`relreason reproduce transnar-ood`: TransNAR with and without its pre-trained NAR, in and out of distribution.

The two columns must differ in the NAR alone (same text model, data, budget and seed), every TransNAR cell
must read the NAR cell of its own algorithm and seed, which the study trains first, and the table must
show both columns in and out of distribution with their difference.
"""

from __future__ import annotations

import json
from pathlib import Path
import shutil

import pytest
import torch
from typer.testing import CliRunner

from relreason.cli.main import app
from relreason.runs.stats import t975
from relreason.runtime import KERNEL_LEVELS, cpu_kernels, kernels_environment
from relreason.studies.cells import config_differences, nar_cells, plan_cells
from relreason.studies.report import distribution_breakdown, size_classes
from relreason.studies.results_report import claim_lines
from relreason.studies.tables import TABLES
from relreason.tasks import expand_tasks

runner = CliRunner()
STUDY = TABLES.get("transnar-ood")
WITH, WITHOUT = (v.label for v in STUDY.variants)
NAR_ONLY = ["model.nar", "model.nar_config", "model.use_nar"]  # what may differ between the two columns

# A study of seconds: a 1-layer text model of width 16 and a Triplet-GMPNN of width 8, a few examples each;
# the test sizes stay the paper's 10, 12 and 14 (in distribution: 12, the rest out of it).
TINY_TEXT = ["model.layers=1", "model.width=16", "model.heads=2", "train.batch_size=4", "train.train_examples=8",
             "train.eval_every_examples=8", "data.train_num=8", "data.val_num=1", "data.test_num=2"]
TINY_NAR = ["nar.model.hidden=8", "nar.train.batch_size=4", "nar.train.train_examples=8",
            "nar.train.eval_every_examples=8", "nar.data.val_num=4", "nar.data.test_num=4"]


def sets(items: list[str]) -> list[str]:
    return [x for s in items for x in ("--set", s)]


def test_the_columns_differ_in_the_nar_alone_and_each_transnar_cell_reads_its_own_algorithms_nar(tmp_path):
    tasks = expand_tasks(STUDY.tasks)
    assert len(tasks) >= 4 and len(STUDY.variants) == 2 and STUDY.seeds == 3
    cells = plan_cells(STUDY, tasks, (0, 1), out=tmp_path)
    by = {(c.variant.label, c.task, c.seed): c for c in cells}
    for task in tasks:
        for seed in range(2):
            with_nar, without = by[WITH, task, seed], by[WITHOUT, task, seed]
            # same text model, data, budget and seed: the resolved configs differ in the NAR alone
            assert config_differences(with_nar.config.to_dict(), without.config.to_dict()) == NAR_ONLY
            assert with_nar.config.recipe == without.config.recipe == "transnar_ood"
            assert with_nar.config.model.use_nar and not without.config.model.use_nar and without.nar is None
            assert with_nar.comparable and without.comparable
            # the NAR cell of the same algorithm and seed, in the protocol layout, is what model.nar names
            nar = with_nar.nar
            algorithm = task.removeprefix("text:")
            assert (nar.task, nar.seed, nar.config.model_name, nar.config.train.seed) == (algorithm, seed,
                                                                                         "triplet_gmpnn", seed)
            assert nar.directory == tmp_path / "cells" / "triplet_gmpnn" / "transnar_ood_nar" / algorithm / f"seed{seed}"
            assert with_nar.config.model.nar == str(nar.run_dir)
            assert with_nar.config.model.nar_config["config"] == nar.config.to_dict()
    assert len(nar_cells(cells)) == len(tasks) * 2  # one NAR per algorithm and seed, none for the text column


def test_models_picks_a_column_by_its_model_or_by_its_label_alone(tmp_path):
    """Both columns are model transnar: `--models transnar` keeps both, `--models "text transformer"` (the
    label) that column alone, as a verification of one column's cells needs."""
    def labels(models):
        return sorted({c.variant.label for c in plan_cells(STUDY, ["text:bfs"], (0,), out=tmp_path, models=models)})

    assert labels(["transnar"]) == sorted([WITH, WITHOUT])
    assert labels([WITHOUT]) == [WITHOUT]
    assert labels([WITHOUT, "transnar"]) == sorted([WITH, WITHOUT])


def test_the_text_weights_start_the_same_with_and_without_the_nar():
    """The workload seeds the text model after building the NAR: TransNAR's text part is drawn exactly as
    the text transformer's (its cross-attention after), so the columns start from the same text weights."""
    from relreason.config import build_config
    from relreason.models.text import TextTransformer, TransNAR

    m = build_config("transnar", "text:insertion_sort", "transnar_ood").model
    torch.manual_seed(3)
    text = TextTransformer(m.text_config())
    torch.manual_seed(3)
    both = TransNAR(m.text_config(), m.cross_config(128, 128))
    mine = both.state_dict()
    assert all(torch.equal(w, mine[k]) for k, w in text.state_dict().items())


def test_the_study_trains_the_nars_first_and_tables_both_columns_in_and_out_of_distribution(tmp_path):
    from tests.cli.cli_run import relreason, succeeds

    out = tmp_path / "reproduce"
    command = ["reproduce", "transnar-ood", "--tasks", "text:insertion_sort", "--seeds", "1", "--out", str(out),
               *sets(TINY_TEXT), *sets(TINY_NAR)]
    first = relreason(*command, "--json")
    result = json.loads(succeeds(first))
    assert not result["missing"] and len(result["cells"]) == 2
    # the NAR trained before the TransNAR cell that reads it
    assert first.stderr.index("triplet-gmpnn nar / insertion_sort / seed 0") < first.stderr.index("transnar / text:")
    nar = out / "cells" / "triplet_gmpnn" / "transnar_ood_nar" / "insertion_sort" / "seed0" / "run"
    assert (nar / "results.json").is_file()
    assert {c["variant"]: c["config"]["model"]["nar"] for c in result["cells"]} == {WITH: str(nar), WITHOUT: None}
    table = json.loads((out / "tables" / "transnar-ood" / "results.json").read_text())["distribution_table"]
    assert [r["model"] for r in table] == [WITH, WITHOUT, f"{WITH} minus {WITHOUT}"]
    columns = set(table[0])
    for head in ("in distribution (n=12)", "OOD, interpolation (n=10)", "OOD, extrapolation (n=14)"):
        assert {f"{head}: {s}" for s in ("shape", "parse", "CLRS")} <= columns
    # read back (nothing trains): both tables, labelled a reduced-scale study; the NAR cell listed by --status
    again = runner.invoke(app, [*command, "--no-train"], env={"COLUMNS": "400"})
    assert again.exit_code == 0, again.output
    assert "REDUCED-SCALE study of TransNAR's claim, not the paper's protocol" in again.output
    assert "in and out of distribution" in again.output
    status = runner.invoke(app, [*command, "--status", "--json"])
    assert [r["cell"] for r in json.loads(status.stdout)["cells"]][0] == "triplet-gmpnn nar / insertion_sort / seed 0"
    # RESULTS.md: the table with its in/out-of-distribution block; the NAR cell in no other table (ibarz2022's
    # Triplet-GMPNN is another protocol of the same model)
    md = tmp_path / "RESULTS.md"
    res = runner.invoke(app, ["results", "--from", str(out), "--results", str(tmp_path / "results"), "--md", str(md)])
    assert res.exit_code == 0, res.output
    text = md.read_text()
    assert "## transnar-ood: REDUCED-SCALE study" in text and "In and out of distribution" in text
    assert "OOD, extrapolation (n=14): CLRS" in text
    assert "## ibarz2022" not in text
    # the NAR cell is kept with the results (the TransNAR cells' input), without the model-selection diagnostics
    # of table cells (a larger test set: hours for a real NAR, and it is in no table)
    kept = tmp_path / "results" / "cells" / "triplet_gmpnn" / "transnar_ood_nar" / "insertion_sort"
    assert (kept / "seed0.json").is_file()
    assert not (tmp_path / "results" / "selection" / "triplet_gmpnn").exists()
    # a fresh checkout with the NAR cell committed and the TransNAR cells not: the NAR weights are not committed, so
    # the NAR cell is trained again for the cells that read it (not "committed: done", which left them waiting
    # forever), and must score as committed
    whole = ["reproduce", "transnar-ood", "--tasks", "text:insertion_sort", "--seeds", "1", *sets(TINY_TEXT),
             *sets(TINY_NAR), "--committed", str(tmp_path / "results"), "--out", str(tmp_path / "fresh0")]
    nothing = relreason(*whole)  # every cell committed: none trains, and none waits for a NAR it does not need
    succeeds(nothing)
    assert "wait for their NAR" not in nothing.stderr and "trained again: cells still to train" not in nothing.stderr
    assert not (tmp_path / "fresh0" / "cells").exists()
    partly = tmp_path / "partly"
    shutil.copytree(tmp_path / "results", partly)
    shutil.rmtree(partly / "cells" / "transnar")
    resume = ["reproduce", "transnar-ood", "--tasks", "text:insertion_sort", "--seeds", "1", *sets(TINY_TEXT),
              *sets(TINY_NAR), "--committed", str(partly), "--json"]
    again = relreason(*resume, "--out", str(tmp_path / "fresh1"))
    assert not json.loads(succeeds(again))["missing"] and "trained again: cells still to train read" in again.stderr
    record = json.loads((partly / "cells" / "triplet_gmpnn" / "transnar_ood_nar" / "insertion_sort" / "seed0.json")
                        .read_text())
    (partly / "cells" / "triplet_gmpnn" / "transnar_ood_nar" / "insertion_sort" / "seed0.json").write_text(
        json.dumps({**record, "best_val": record["best_val"] + 0.125}))
    other = relreason(*resume, "--out", str(tmp_path / "fresh2"))
    assert other.returncode == 1 and "differs from its result committed under" in other.stderr, other.stderr
    assert not (tmp_path / "fresh2" / "cells" / "transnar").exists()  # no cell read the NAR that differs
    # made under another torch release (which may draw other initial weights from a seed): a record naming the
    # weights it started from is compared with this process's draw before any training, one naming none is refused
    # by its release; each refusal with what would help
    nar_record = partly / "cells" / "triplet_gmpnn" / "transnar_ood_nar" / "insertion_sort" / "seed0.json"
    h200 = ["NVIDIA H200, cuda, torch 2.0.0+cu118"]
    nar_record.write_text(json.dumps({**record, "hardware": h200, "init_weights": "0" * 16}))
    refused = relreason(*resume, "--out", str(tmp_path / "fresh-start"))
    assert refused.returncode == 1 and f"started from initial weights {'0' * 16} and this process draws " \
        f"{record['init_weights']} from its seed" in refused.stderr, refused.stderr
    assert "scripts/torch_release_venv.sh 2.0.0" in refused.stderr and not (tmp_path / "fresh-start" / "cells").exists()
    nar_record.write_text(json.dumps({**{k: v for k, v in record.items() if k != "init_weights"}, "hardware": h200}))
    refused = relreason(*resume, "--out", str(tmp_path / "fresh-torch"))
    assert refused.returncode == 1 and "it was made with torch 2.0.0" in refused.stderr, refused.stderr
    assert "scripts/torch_release_venv.sh 2.0.0" in refused.stderr and not (tmp_path / "fresh-torch" / "cells").exists()
    nar_record.write_text(json.dumps({**record, "hardware": h200}))  # the same start: trained again, compared
    succeeds(relreason(*resume, "--out", str(tmp_path / "fresh-same-start")))
    # made with other CPU kernels: refused before any training (it would train otherwise), with what would help
    release = torch.__version__  # this process's: only the kernels differ
    here = cpu_kernels()
    lower = [level for level in KERNEL_LEVELS if level != here and kernels_environment(level)][:1]  # e.g. DEFAULT
    for made in ("AVX1024", *lower):  # a level above this machine's, and one below it
        (partly / "cells" / "triplet_gmpnn" / "transnar_ood_nar" / "insertion_sort" / "seed0.json").write_text(
            json.dumps({**record, "hardware": [f"A (2 cores), 1 torch thread, cpu, {made} kernels, torch {release}"]}))
        refused = relreason(*resume, "--out", str(tmp_path / f"fresh-{made}"))
        assert refused.returncode == 1 and f"was made with {made} CPU kernels and this process computes with {here}" \
            in refused.stderr, refused.stderr
        hint = (f"run the same command again: set ATEN_CPU_CAPABILITY={made.lower()}" if kernels_environment(made)
                else f"run the same command again: use a machine with {made} kernels")
        assert hint in refused.stderr and not (tmp_path / f"fresh-{made}" / "cells").exists()
    # --verify in a fresh checkout: the NAR weights are not committed, so the TransNAR cell's NAR cell is re-trained
    # in full from its result file (and must give its committed scores) before the TransNAR cell's validations
    shutil.rmtree(out)
    verify = ["reproduce", "transnar-ood", "--tasks", "text:insertion_sort", "--seeds", "1", "--out",
              str(tmp_path / "fresh"), "--verify", "--results", str(tmp_path / "results"), "--json"]
    rows = {r["cell"]: r for r in json.loads(succeeds(relreason(*verify)))["verified"]}
    transnar = next(r for cell, r in rows.items() if cell.startswith("transnar/"))
    assert all(r["matches"] for r in rows.values()) and len(rows) == 3  # the NAR cell, both columns
    assert transnar["nar"]["matches"] and "its NAR cell re-trained in full on cpu" in transnar["compared"]
    nar_result = kept / "seed0.json"
    record = json.loads(nar_result.read_text())
    nar_result.write_text(json.dumps({**record, "best_val": record["best_val"] + 0.125}))
    bad = relreason(*verify)
    assert bad.returncode == 1 and "its NAR cell re-trained otherwise: best validation" in bad.stdout, bad.stdout


@pytest.mark.parametrize("bad, message", [
    (["nar.train.seed=1"], "nar.train.seed"),
    (["model.nar=runs/mine"], "model.nar"),
    (["model.use_nar=true"], "model.use_nar"),
])
def test_the_nar_and_the_seed_are_the_studys_own(tmp_path, bad, message):
    res = runner.invoke(app, ["reproduce", "transnar-ood", "--tasks", "text:insertion_sort", "--seeds", "1",
                              "--out", str(tmp_path), *sets(bad)])
    assert res.exit_code == 1 and message in res.output and "itself" in res.output, res.output


def test_nar_settings_need_a_column_that_reads_a_nar_and_a_nar_one_algorithm(tmp_path):
    from relreason.errors import RelreasonError

    res = runner.invoke(app, ["reproduce", "clrs30", "--models", "mpnn", "--tasks", "bfs", "--seeds", "1",
                              "--out", str(tmp_path), "--set", "nar.train.lr=0.1", "--no-train"])
    assert res.exit_code == 1 and "no column of clrs30 reads a NAR" in res.output, res.output
    with pytest.raises(RelreasonError, match="one NAR per algorithm; text:core8 is not one algorithm"):
        plan_cells(STUDY, ["text:core8"], (0,), out=tmp_path)


def _cell(variant: str, seed: int, clrs: dict[int, float], algorithm: str = "bfs") -> dict:
    return {"variant": variant, "seed": seed, "config": {"data": {"preset": "paper"}},
            "per_task": {f"{algorithm}@{n}": {"algorithm": algorithm, "size": n,
                                              "outputs": {"shape": 1.0, "parse": 1.0, "clrs": x}}
                         for n, x in clrs.items()}}


def test_the_distribution_table_against_hand_values():
    """Sizes 10, 12 and 14 against the paper preset's training sizes 4..8 and 12: 12 in distribution, 10
    interpolation, 14 extrapolation; per column mean ± std over seeds, and the first column minus the other
    with Welch's interval (hand: diffs of means; variances 0.5^2 / 2 + 0.5^2 / 2 = 0.25, df 2, t 4.303)."""
    assert size_classes(_cell(WITH, 0, {10: 0.5, 12: 0.5, 14: 0.5})) == {
        10: "OOD, interpolation", 12: "in distribution", 14: "OOD, extrapolation"}
    result = {"variants": [WITH, WITHOUT], "seeds": 2, "cells": [
        _cell(WITH, 0, {10: 0.80, 12: 0.90, 14: 0.700}), _cell(WITH, 1, {10: 0.80, 12: 0.90, 14: 0.710}),
        _cell(WITHOUT, 0, {10: 0.60, 12: 0.90, 14: 0.400}), _cell(WITHOUT, 1, {10: 0.60, 12: 0.90, 14: 0.410})]}
    rows, columns = distribution_breakdown(result)
    assert columns[:3] == ["algorithm", "model", "in distribution (n=12): shape"]
    mine, theirs, diff = rows
    assert mine["OOD, extrapolation (n=14): CLRS"] == "70.5 ± 0.7" and theirs["OOD, extrapolation (n=14): CLRS"] == "40.5 ± 0.7"
    half = 4.303 * 0.5 ** 0.5
    assert diff["OOD, extrapolation (n=14): CLRS"] == f"+30.0 [{30 - half:+.1f}, {30 + half:+.1f}] higher"
    assert diff["in distribution (n=12): CLRS"] == "+0.0 [+0.0, +0.0] equal within ±1"
    assert diff["OOD, interpolation (n=10): CLRS"] == "+20.0 [+20.0, +20.0] higher"


def test_the_distribution_tables_average_against_hand_values():
    """Over the algorithms where every column has two seeds (bfs, dfs; dijkstra has one and is named as left
    out): each column's mean of the per-algorithm means, and the first minus the other with Welch's interval
    from the four per-seed-group variances over k^2 = 4 (hand: extrapolation diffs +30 and 0, mean +15; the
    variances of the means 0.25, 0.25 (bfs) and 1, 1 (dfs), over 4: 0.0625, 0.0625, 0.25, 0.25; sum 0.625;
    df = 0.625^2 / (2 x 0.0625^2 + 2 x 0.25^2) = 2.94, each part with 1 degree of freedom)."""
    result = {"variants": [WITH, WITHOUT], "seeds": 2, "cells": [
        _cell(WITH, 0, {14: 0.70}), _cell(WITH, 1, {14: 0.71}),
        _cell(WITHOUT, 0, {14: 0.40}), _cell(WITHOUT, 1, {14: 0.41}),
        _cell(WITH, 0, {14: 0.50}, "dfs"), _cell(WITH, 1, {14: 0.52}, "dfs"),
        _cell(WITHOUT, 0, {14: 0.50}, "dfs"), _cell(WITHOUT, 1, {14: 0.52}, "dfs"),
        _cell(WITH, 0, {14: 0.90}, "dijkstra"), _cell(WITHOUT, 0, {14: 0.10}, "dijkstra")]}
    rows, _ = distribution_breakdown(result)
    head = "OOD, extrapolation (n=14): CLRS"
    mine, theirs, diff = rows[-3:]
    label = "average (2: bfs, dfs; left out, one seed: dijkstra)"
    assert [r["algorithm"] for r in rows[-3:]] == [label] * 3
    assert (mine["model"], theirs["model"], diff["model"]) == (WITH, WITHOUT, f"{WITH} minus {WITHOUT}")
    assert mine[head] == "60.8" and theirs[head] == "45.8"  # (70.5 + 51) / 2, (40.5 + 51) / 2
    df = 0.625 ** 2 / (2 * 0.0625 ** 2 + 2 * 0.25 ** 2)
    assert abs(df - 2.941) < 1e-3
    half = t975(df) * 0.625 ** 0.5
    assert diff[head] == f"+15.0 [{15 - half:+.1f}, {15 + half:+.1f}] higher"
    # one seed everywhere: no average row (nothing it could compare)
    single = {"variants": [WITH, WITHOUT], "seeds": 1, "cells": [
        c for c in result["cells"] if c["seed"] == 0]}
    assert not any(r["algorithm"].startswith("average") for r in distribution_breakdown(single)[0])


def test_a_column_whose_seeds_score_identically_is_named_in_the_average():
    """The text transformer answered "0" to every naive_string_matcher question at all three seeds (docs/text.md):
    its seeds score identically at every size, its spread is zero and Welch's interval is the other column's
    alone. The average row (the summary's claim line) names such a column, by its CLRS scores alone (the claim's;
    its parse scores may differ); identical shape and parse scores (100 for any model that learned the format) do
    not count, nor does one size alone."""
    result = {"variants": [WITH, WITHOUT], "seeds": 2, "cells": [
        _cell(WITH, 0, {12: 0.9, 14: 0.70}), _cell(WITH, 1, {12: 0.9, 14: 0.71}),
        _cell(WITHOUT, 0, {12: 0.2, 14: 0.40}), _cell(WITHOUT, 1, {12: 0.2, 14: 0.40}),
        _cell(WITH, 0, {12: 0.9, 14: 0.50}, "dfs"), _cell(WITH, 1, {12: 0.9, 14: 0.52}, "dfs"),
        _cell(WITHOUT, 0, {12: 0.5, 14: 0.50}, "dfs"), _cell(WITHOUT, 1, {12: 0.6, 14: 0.50}, "dfs")]}
    result["cells"][2]["per_task"]["bfs@14"]["outputs"]["parse"] = 0.9  # one seed's answers parse less often
    rows, _ = distribution_breakdown(result)
    assert rows[-1]["algorithm"] == ("average (2: bfs, dfs; seeds scoring identically (CLRS, every size; no spread "
                                     f"to test against): {WITHOUT} on bfs)")
    line = claim_lines("transnar-ood", (rows, _))[0]
    assert f"seeds scoring identically (CLRS, every size; no spread to test against): {WITHOUT} on bfs" in line


def test_a_column_with_one_seed_gives_the_difference_but_no_interval():
    """Both columns are samples of ours: with two seeds on one side and one on the other, the difference is
    shown without an interval or verdict (treating the lone seed as exact would narrow the interval falsely)."""
    result = {"variants": [WITH, WITHOUT], "seeds": 2, "cells": [
        _cell(WITH, 0, {14: 0.70}), _cell(WITH, 1, {14: 0.71}), _cell(WITHOUT, 0, {14: 0.40})]}
    rows, _ = distribution_breakdown(result)
    assert rows[-1]["model"] == f"{WITH} minus {WITHOUT}" and rows[-1]["OOD, extrapolation (n=14): CLRS"] == "+30.5"


def test_graph_cells_have_no_distribution_table():
    """Graph cells score per task and size too (per_task), but have no text preset: no in/out-of-distribution
    table, and no error."""
    graph = {"variant": "mpnn", "seed": 0, "config": {"data": {"train_size": 16}},
             "per_task": {"bfs": {"algorithm": "bfs", "size": 64, "outputs": {"clrs": 0.5}}}}
    assert distribution_breakdown({"variants": ["mpnn"], "seeds": 1, "cells": [graph]}) is None


def test_a_transnar_cell_counts_its_nar_by_what_it_computed_not_where_it_lies(tmp_path):
    """The NAR a TransNAR cell reads enters its identity by the NAR's own identity: another sweep directory or
    another machine's thread count is the same cell; a NAR trained on another budget is another."""
    from relreason.studies.cells import result_identity

    def identity(out, extra=()):
        (cell,) = plan_cells(STUDY, ["text:bfs"], (0,), out=out, sets=list(extra), models=None)[:1]
        return result_identity(cell.config.to_dict())

    here = identity(tmp_path / "a")
    assert identity(tmp_path / "b", ["nar.train.threads=2"]) == here
    assert identity(tmp_path / "a", ["nar.train.train_examples=64"]) != here


def test_a_nar_stored_before_a_key_was_added_is_the_same_nar():
    """A TransNAR cell stores its NAR's config whole: one written before a config key existed (here
    train.select, model.drop_hints) counts with the key's default, as a cell's own config does."""
    from relreason.studies.cells import result_identity

    cell = next(c for c in plan_cells(STUDY, ["text:bfs"], (0,), out=Path("out")) if c.variant.nar is not None)
    plain = cell.config.to_dict()
    old = json.loads(json.dumps(plain))
    nar = old["model"]["nar_config"]["config"]
    del nar["train"]["select"], nar["model"]["drop_hints"]
    assert result_identity(old) == result_identity(plain)
    nar["train"]["lr"] = 0.5  # a value that differs is another NAR
    assert result_identity(old) != result_identity(plain)


def test_machine_settings_reach_the_nar_cells_and_nar_settings_only_them(tmp_path):
    """`reproduce_results.sh` runs every line with --set train.threads=1: the NAR cells of a lane must run on
    one thread too. A nar.* setting is the NAR cells' alone, and wins over the shared one."""
    (cell,) = [c for c in plan_cells(STUDY, ["text:bfs"], (0,), out=tmp_path,
                                     sets=["train.threads=1", "train.device=cpu", "nar.train.lr=0.01"])
               if c.nar is not None]
    assert (cell.nar.config.train.threads, cell.nar.config.train.device) == (1, "cpu")
    assert cell.nar.config.train.lr == 0.01 and cell.config.train.lr != 0.01
    assert not cell.comparable and "model.nar_config" in cell.why_not  # its NAR is not the protocol's
    (cell,) = [c for c in plan_cells(STUDY, ["text:bfs"], (0,), out=tmp_path, sets=["train.threads=1"]) if c.nar]
    assert cell.comparable and cell.nar.comparable and cell.nar.config.train.threads == 1  # machine keys only
    (cell,) = [c for c in plan_cells(STUDY, ["text:bfs"], (0,), out=tmp_path,
                                     sets=["train.threads=1", "nar.train.threads=2"]) if c.nar is not None]
    assert (cell.config.train.threads, cell.nar.config.train.threads) == (1, 2)
