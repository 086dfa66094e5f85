"""``python -m metacal.evaluate DIR``: a predictions folder (or a run directory) evaluates every .npz in it, or
says in one line why it cannot."""

import json

from test_cli import make_npz, run


def test_run_directory_and_predictions_folder(tmp_path, capsys):
    folder = tmp_path / "run" / "predictions"
    folder.mkdir(parents=True)
    make_npz(folder / "val.npz", seed=1)
    make_npz(folder / "test.npz", seed=2, kind="probs")
    single = {}
    for name in ("test.npz", "val.npz"):
        code, out, _ = run([folder / name, "--json"], capsys)
        single[name] = json.loads(out)
    for target in (tmp_path / "run", folder):  # the run directory stands for its predictions/
        code, out, err = run([target, "--json"], capsys)
        assert code == 0 and err == ""
        assert json.loads(out) == single  # one object, keyed by file name, sorted
    code, out, _ = run([tmp_path / "run", "--calib", folder / "val.npz"], capsys)
    blocks = out.split("\n\n")
    assert code == 0 and [b.splitlines()[0] for b in blocks] == [f"== {folder / 'test.npz'} ==",
                                                                 f"== {folder / 'val.npz'} =="]
    assert all("TS-NLL T=" in b for b in blocks)


def test_folders_that_cannot_be_evaluated_are_one_line(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("no predictions here")
    run_dir = tmp_path / "run"
    (run_dir / "predictions").mkdir(parents=True)
    two = tmp_path / "two"
    two.mkdir()
    make_npz(two / "a.npz")
    make_npz(two / "b.npz", seed=3)
    for argv, message in [
        ([empty], f"{empty} holds no .npz files and no predictions/ folder; pass a PRED.npz, a predictions folder"),
        ([run_dir], f"{run_dir / 'predictions'} holds no .npz files; pass"),
        ([two, "--plot", tmp_path / "x.png"], f"--plot needs one PRED.npz; {two} holds 2 (a.npz, b.npz)"),
    ]:
        code, out, err = run(argv, capsys)
        assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err
    (two / "b.npz").write_bytes(b"not an npz")
    code, _, err = run([two], capsys)
    assert code == 2 and f"{two / 'b.npz'}: cannot read as .npz" in err
