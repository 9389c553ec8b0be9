"""Report figures: curves from sweeps / JSON / a run spec, sweep parameter plots, heatmaps."""

import json
import os

import numpy as np
import pytest

import okl_core
from okl_core.data.layout import write_dataset
from okl_core.evaluation import permuted, run_online
from okl_experiments import figures
from okl_experiments.data import okl_source
from okl_experiments.grid import SearchSpace
from okl_experiments.sweep import SweepSettings, make_points, sweep
from pipelines import report

PNG = b"\x89PNG\r\n\x1a\n"


def _data(path, n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)).astype(np.float32)
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    write_dataset(path, X, y, "binary", classes=[-1, 1])
    return X, y


def _png(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data.startswith(PNG) and 5_000 < len(data) < 200_000
    return data


@pytest.fixture
def grid_results(tmp_path):
    _data(tmp_path / "d")
    source = okl_source(str(tmp_path / "d"))
    points = make_points("fogd", SearchSpace.from_tokens(["sigma=0.5,1,2", "eta=0.05,0.5", "n_components=16"]), source)
    return sweep(SweepSettings("fogd", source, repeats=2), points, out_dir=str(tmp_path / "sweep"))


def test_sweep_figures_one_per_parameter_and_a_heatmap(grid_results, tmp_path):
    written = report.run(["sweep", grid_results.results_path, "--output", str(tmp_path / "fig")])
    names = sorted(p.rsplit("/", 1)[1] for p in written)
    assert names == ["sweep_eta.png", "sweep_heatmap_sigma_eta.png", "sweep_sigma.png"]
    for path in written:
        _png(path)
    with pytest.raises(SystemExit, match="heatmap"):
        report.run(["sweep", grid_results.results_path, "--output", str(tmp_path / "f2"), "--heatmap", "sigma,nope"])


def test_random_search_heatmap_is_a_scatter(tmp_path):
    _data(tmp_path / "d")
    source = okl_source(str(tmp_path / "d"))
    points = make_points("fogd", SearchSpace.from_tokens(["sigma=0.3:3", "eta=1e-3:1", "n_components=16"]), source, samples=6)
    result = sweep(SweepSettings("fogd", source), points, out_dir=str(tmp_path / "sweep"))
    written = figures.plot_sweep(result.results_path, str(tmp_path / "fig"))
    assert len(written) == 3
    for path in written:
        _png(path)


def test_curves_from_sweep_results_and_curve_json(grid_results, tmp_path):
    X, y = _data(tmp_path / "d2", seed=1)
    learner = okl_core.make_learner("fogd", n_inputs=3, n_components=16, sigma=1.0, eta=0.1)
    curve_file = tmp_path / "run.json"
    curve_file.write_text(json.dumps(figures.curve_record(run_online(learner, X, y), "direct run")))
    curves = figures.read_curves([grid_results.results_path, str(curve_file)], top=2)
    assert [c.label for c in curves][-1] == "direct run" and len(curves) == 3
    best = min(grid_results.rows, key=lambda r: (r["online_mistake_rate_mean"], r["point"]))
    assert curves[0].value[-1] == pytest.approx(best["online_mistake_rate_mean"])  # mean curve ends at the mean
    out = tmp_path / "figures" / "online_error.png"
    assert report.run(["curves", grid_results.results_path, str(curve_file), "--output", str(tmp_path / "figures"), "--log_x"]) == [str(out)]
    _png(out)
    with pytest.raises(SystemExit, match="no such file"):
        report.run(["curves", str(tmp_path / "missing.json")])


def test_curve_from_a_training_pipeline_metrics_file(tmp_path):
    batches = [{"shard": s, "round": 0, "seq": q, "rows": 100, "mistakes": m}
               for s, q, m in [(0, 0, 30), (1, 0, 40), (0, 1, 10), (1, 1, 20)]]
    metrics = {"learner": {"learner": "fogd", "task": "binary", "config": {}}, "data": {"train": {"name": "a9a"}},
               "batches": batches, "online": {"merged": {"baseline": {"mistake_rate": 0.4}}}}
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(metrics))
    [curve] = figures.read_curves([str(path)])
    assert curve.label == "fogd on a9a" and curve.baseline == 0.4  # drawn as a line by plot_curves
    # Rows learned by the whole job, both shards in step: halfway 70 mistakes in 200 rows.
    np.testing.assert_array_equal(curve.n, [200, 400])
    np.testing.assert_allclose(curve.value, [0.35, 0.25])


def test_run_spec_runs_the_learners_and_plots_exact_curves(tmp_path):
    X, y = _data(tmp_path / "d")
    spec = {"title": "toy", "data": {"path": "d"}, "repeats": 2, "shuffle_seed": 5,
            "runs": [{"label": "FOGD", "learner": "fogd", "params": {"sigma": 1.0, "eta": 0.1, "n_components": 16}},
                     {"label": "DSG", "learner": "dsg", "params": {"sigma": "median", "theta": 2.0, "batch_size": 8}}]}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    written = report.run(["run", str(path), "--output", str(tmp_path), "--curves_out", str(tmp_path / "c.json")])
    _png(written[0])
    curves = json.loads((tmp_path / "c.json").read_text())
    assert [c["label"] for c in curves] == ["FOGD", "DSG"]
    learner = okl_core.make_learner("fogd", n_inputs=3, sigma=1.0, eta=0.1, n_components=16)
    runs = [run_online(learner, *permuted(X, y, 5, r)) for r in range(2)]
    np.testing.assert_allclose(curves[0]["curve"]["value"], np.mean([r.curve_value for r in runs], axis=0), rtol=0, atol=0)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"data": {"path": "d"}, "runs": [{"learner": "fogd", "params": {"eta": -1}}]}))
    with pytest.raises(SystemExit, match="eta"):
        report.run(["run", str(bad), "--output", str(tmp_path)])


@pytest.fixture
def saved_figures(monkeypatch):
    """The figures the report writes, by file name (still open for inspection)."""
    saved = {}
    real = figures._save

    def keep(fig, out):
        saved[os.path.basename(out)] = fig
        real(fig, out)

    monkeypatch.setattr(figures, "_save", keep)
    return saved


def _luminance(rgba) -> float:
    r, g, b = rgba[:3]
    return 0.299 * r + 0.587 * g + 0.114 * b


def test_heatmap_labels_are_legible(grid_results, tmp_path, saved_figures):
    from matplotlib.colors import to_rgba

    figures.plot_sweep(grid_results.results_path, str(tmp_path / "fig"))
    fig = saved_figures["sweep_heatmap_sigma_eta.png"]
    fig.canvas.draw()
    ax, bar = fig.axes
    image = ax.images[0]
    grid = image.get_array()
    assert len(ax.texts) == grid.size == 6
    for text in ax.texts:
        j, i = (round(v) for v in text.get_position())
        assert text.get_text() == f"{grid[i, j]:.3g}" and text.get_fontsize() >= 9
        cell = image.cmap(image.norm(grid[i, j]))
        assert abs(_luminance(to_rgba(text.get_color())) - _luminance(cell)) >= 0.45  # dark on light, light on dark
    assert [t.get_fontweight() for t in ax.texts].count("bold") == 1  # the best cell
    for axis in (ax.xaxis, ax.yaxis):
        labels = [t for t in axis.get_ticklabels() if t.get_text()]
        assert labels and all(t.get_fontsize() >= 10 for t in labels)
        boxes = [t.get_window_extent() for t in labels]
        assert not any(a.overlaps(b) for k, a in enumerate(boxes) for b in boxes[k + 1:])
    assert [t.get_text() for t in ax.xaxis.get_ticklabels()] == ["0.5", "1", "2"]
    assert "online_mistake_rate" in bar.get_ylabel() and "lower is better" in bar.get_ylabel()


def test_curve_legend_hides_no_curve(grid_results, tmp_path, saved_figures):
    report.run(["curves", grid_results.results_path, "--top", "5", "-o", str(tmp_path / "c.png")])
    fig = saved_figures["c.png"]
    fig.canvas.draw()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent()
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(texts) == 6 and legend.y1 <= ax.get_window_extent().y0  # below the axes
    assert fig.get_window_extent().contains(legend.x0 + 1, legend.y0 + 1)  # inside the image
    # Every point ran on the same rows: one line for their majority class, from the results table.
    majority = grid_results.rows[0]["online_mistake_rate_baseline"]
    assert majority == okl_core.evaluation.constant_baseline("binary", _data(tmp_path / "again")[1])["mistake_rate"]
    assert texts[-1] == f"majority class ({majority:.4g})" and list(ax.get_lines()[-1].get_ydata()) == [majority, majority]


def test_run_spec_reports_each_run_as_it_starts_and_ends(tmp_path):
    import io

    _data(tmp_path / "d")
    spec = {"data": {"path": "d"}, "repeats": 2,
            "runs": [{"label": "FOGD", "learner": "fogd", "params": {"sigma": 1.0, "eta": 0.1, "n_components": 16}},
                     {"label": "FOGD slow", "learner": "fogd", "params": {"sigma": 1.0, "eta": 0.01, "n_components": 16}}]}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    stream = io.StringIO()
    curves, _ = figures.run_spec(str(path), progress=stream)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "run 1/4: FOGD (repeat 1/2), 600 rows ..." and lines[6] == "run 4/4: FOGD slow (repeat 2/2), 600 rows ..."
    assert lines[7].startswith("[####################] 4/4 runs, 2/2 points,")
    ends = [float(line.split("online_mistake_rate ")[1].split()[0]) for line in (lines[5], lines[7])]  # the two repeats of FOGD slow
    assert np.mean(ends) == pytest.approx(curves[1].value[-1], abs=1e-4)  # the curve is their mean
    assert figures.run_spec(str(path))[0][0].value.tolist() == curves[0].value.tolist() and len(lines) == 8


def _setting(key, learner, data, source, metric, paper, n, value, status="ok"):
    return {"key": key, "learner": learner, "data": data, "metric": metric, "status": status, "source": source,
            "paper": paper, "ours_mean": value[-1] if value else None, "curve": {"n": n, "value": value}}


@pytest.fixture
def reproduce_json(tmp_path):
    n = list(range(10, 1010, 10))
    rising = [0.5 / (1 + i / 20) for i in range(len(n))]
    falling = [0.4 - 0.001 * i for i in range(len(n))]
    outcomes = [
        _setting("fogd-a9a", "fogd", "a9a", "Lu et al. 2016, Table 5", "online_mistake_rate", 0.169, n, rising),
        _setting("nogd-a9a", "nogd", "a9a", "Lu et al. 2016, Table 5", "online_mistake_rate", 0.18, n, falling),
        _setting("fogd-w8a", "fogd", "w8a", "Lu et al. 2016, Table 5", "online_mistake_rate", 0.0243, n[:50], falling[:50]),
        _setting("fogd-w8a-batch", "fogd", "w8a-train", "Lu et al. 2016, Table 3 (accuracy 97.93%)", "test_mistake_rate", 0.0207,
                 n[:30], rising[:30]),
        _setting("pkawv_taylor-casp", "pkawv_taylor", "casp-pm1", "Jezequel et al. 2019, Figure 2 (no number in the text)",
                 "online_mse", float("nan"), n[:20], falling[:20]),
        _setting("nogd-w8a", "nogd", "w8a", "Lu et al. 2016, Table 5", "online_mistake_rate", 0.0292, [], [], status="skipped"),
        _setting("omkl_gf-m1-airquality", "omkl_gf", "airquality", "Ghari & Shen 2020, Table 1", "online_mse", 0.0081, n, falling),
        _setting("omkl_gf-m7-airquality", "omkl_gf", "airquality", "Ghari & Shen 2020, Table 1", "online_mse", 0.0042, n, rising),
        _setting("raker-airquality", "raker", "airquality", "Ghari & Shen 2020, Table 1", "online_mse", 0.0047, n, rising),
        _setting("oks-bank-square", "oks", "bank", "Li & Liao 2022, regression (spec/oks.md)", "online_mse", 0.024, n, rising),
        _setting("oks-bank-absolute", "oks", "bank", "Li & Liao 2022, regression (spec/oks.md)", "online_mae", 0.0961, n, rising),
    ]
    path = tmp_path / "reproduce.json"
    path.write_text(json.dumps(outcomes))
    return path, outcomes


def _curves_and_marks(ax):
    lines = {line.get_label(): line for line in ax.get_lines()}
    curves = {k.split(" (")[0]: v for k, v in lines.items() if " paper (" not in k}
    marks = {k.split(" paper (")[0]: v for k, v in lines.items() if " paper (" in k}
    return curves, marks


def test_reproduce_figures_one_per_table_and_data_set(reproduce_json, tmp_path, saved_figures):
    path, outcomes = reproduce_json
    written = report.run(["reproduce", str(path), "--output", str(tmp_path / "fig")])
    assert sorted(os.path.basename(p) for p in written) == [
        "ghari_shen_2020_table_1-airquality.png", "jezequel_et_al_2019_figure_2-casp_pm1.png",
        "li_liao_2022_regression-bank-online_mae.png", "li_liao_2022_regression-bank-online_mse.png",  # one metric per figure
        "lu_et_al_2016_table_3-w8a_train.png", "lu_et_al_2016_table_5-a9a.png", "lu_et_al_2016_table_5-w8a.png"]
    for p in written:
        _png(p)
    fig = saved_figures["lu_et_al_2016_table_5-a9a.png"]
    fig.canvas.draw()
    ax = fig.axes[0]
    assert ax.get_title() == "Lu et al. 2016, Table 5: a9a" and ax.get_ylabel() == figures.metric_label("mistake_rate")
    curves, marks = _curves_and_marks(ax)
    assert sorted(curves) == sorted(marks) == ["fogd", "nogd"]
    for rec in outcomes[:2]:
        name = rec["learner"]
        n, value = np.array(rec["curve"]["n"], float), np.array(rec["curve"]["value"], float)
        keep = n >= n[-1] / 50  # the first rows are left out, as in every curve figure
        np.testing.assert_array_equal(curves[name].get_xdata(), n[keep])
        np.testing.assert_array_equal(curves[name].get_ydata(), value[keep])
        assert list(marks[name].get_ydata()) == [rec["paper"]] and 1000 < marks[name].get_xdata()[0] < 1100  # past the curves' end
        assert marks[name].get_color() == curves[name].get_color() and marks[name].get_linestyle() == "None"
    assert curves["fogd"].get_color() != curves["nogd"].get_color() and marks["fogd"].get_xdata() != marks["nogd"].get_xdata()
    legend = ax.get_legend().get_window_extent()
    assert len(ax.get_legend().get_texts()) == 4 and legend.y1 <= ax.get_window_extent().y0  # below the axes
    assert fig.get_window_extent().contains(legend.x0 + 1, legend.y0 + 1)
    nan_paper = saved_figures["jezequel_et_al_2019_figure_2-casp_pm1.png"].axes[0]
    curves, marks = _curves_and_marks(nan_paper)
    assert list(curves) == ["pkawv_taylor"] and not marks  # no number in the paper: no mark
    assert nan_paper.get_ylabel() == figures.metric_label("mse")
    curves, marks = _curves_and_marks(saved_figures["lu_et_al_2016_table_5-w8a.png"].axes[0])
    assert list(curves) == list(marks) == ["fogd"]  # the skipped nogd-w8a has no line
    curves, marks = _curves_and_marks(saved_figures["ghari_shen_2020_table_1-airquality.png"].axes[0])
    assert list(curves) == list(marks) == ["omkl_gf-m1-airquality", "omkl_gf-m7-airquality", "raker"]  # keys where a learner repeats
    assert saved_figures["li_liao_2022_regression-bank-online_mae.png"].axes[0].get_ylabel() == figures.metric_label("mae")


def test_reproduce_figures_refuse_what_has_no_curve(tmp_path):
    path = tmp_path / "reproduce.json"
    path.write_text(json.dumps([_setting("a-b", "a", "b", "X, Table 1", "online_mse", 0.1, [], [], status="error")]))
    with pytest.raises(SystemExit, match="no setting ran with a curve"):
        report.run(["reproduce", str(path), "--output", str(tmp_path)])
    path.write_text(json.dumps([{"label": "x"}]))
    with pytest.raises(SystemExit, match="not a reproduce.json"):
        report.run(["reproduce", str(path), "--output", str(tmp_path)])


def test_scale_figure_is_test_error_against_rows(tmp_path, saved_figures):
    def outcome(rows, dsg, mfogd):
        return {"key": "dsg-mnist8m-10class", "paper": 0.005, "metric": "test_mistake_rate", "rows": rows, "ours": dsg,
                "skipped": None, "runs": {"dsg": {"rows": rows, "test_mistake_rate": dsg},
                                          "mfogd": {"rows": rows, "test_mistake_rate": mfogd}}}
    paths = []
    for rows, dsg, mfogd in [(1_048_576, 0.1295, 0.16), (16_384, 0.1555, 0.2), (65_536, 0.14, 0.18)]:
        (tmp_path / str(rows)).mkdir()
        paths.append(tmp_path / str(rows) / "reproduce-at-scale.json")
        paths[-1].write_text(json.dumps([outcome(rows, dsg, mfogd)]))
    written = report.run(["reproduce", *map(str, paths), "--output", str(tmp_path / "fig")])
    assert [os.path.basename(p) for p in written] == ["scale-dsg_mnist8m_10class.png"]
    ax = saved_figures["scale-dsg_mnist8m_10class.png"].axes[0]
    lines = {line.get_label().split(" (")[0]: line for line in ax.get_lines()}
    assert ax.get_xscale() == "log" and "dsg-mnist8m-10class" in ax.get_title()
    np.testing.assert_array_equal(lines["dsg"].get_xdata(), [16_384, 65_536, 1_048_576])  # sorted by rows
    np.testing.assert_array_equal(lines["dsg"].get_ydata(), [0.1555, 0.14, 0.1295])
    np.testing.assert_array_equal(lines["mfogd"].get_ydata(), [0.2, 0.18, 0.16])
    assert list(lines["paper"].get_ydata()) == [0.005, 0.005]
