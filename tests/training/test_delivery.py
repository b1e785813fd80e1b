"""The tf.data service's records and the dispatcher's verdict on them, mode by mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_resolver.training import delivery

EPOCH = list(range(6))


@pytest.mark.parametrize("mode, seen, said", [
    ("distributed_epoch", [[0, 2, 4], [1, 3, 5]], "every element exactly once"),
    ("distributed_epoch", [[0, 2, 4], [1, 3]], "NOT every element exactly once: 1 missing"),
    ("distributed_epoch", [[0, 1, 2, 3], [3, 4, 5]], "NOT every element exactly once: 1 more than expected"),
    ("parallel_epochs", [EPOCH * 2, EPOCH * 2], "each trainer read every element once from each of the 2 workers"),
    ("parallel_epochs", [EPOCH * 2, EPOCH], "NOT each trainer read every element once from each of the 2 workers: "
                                            "trainer 1: 6 missing"),
    ("shared_parallel", [EPOCH, EPOCH], "every element once from each of the 2 workers"),
    ("shared_parallel", [EPOCH, []], "NOT every element once from each of the 2 workers: 6 missing"),
    ("train", [EPOCH * 3, EPOCH * 3], "steps of an endless stream (no element count is promised)"),
])
def test_each_mode_is_judged_by_its_promise(mode: str, seen: list[list[int]], said: str) -> None:
    line = delivery.verdict(delivery.Mode(mode), seen, 6, 2)
    counts = " + ".join(str(len(s)) for s in seen)
    assert line == f"{mode}: {sum(map(len, seen))} elements across {len(seen)} trainers ({counts}): {said}"


def test_records_round_trip_and_a_missing_one_is_named(tmp_path: Path) -> None:
    for trainer in (0, 1):
        delivery.write(tmp_path / "records", trainer, {"trainer": trainer, "train": [trainer]})
    assert delivery.read(tmp_path / "records", 2) == [{"trainer": 0, "train": [0]}, {"trainer": 1, "train": [1]}]
    missing = delivery.read(tmp_path / "records", 3)
    assert isinstance(missing, str) and missing.startswith("no verdict: trainer 2's record")
    assert "a file system every node shares" in missing


def test_modes_are_read_once_and_an_unknown_word_names_the_option_and_the_words(
        capsys: pytest.CaptureFixture[str]) -> None:
    from slurm_resolver.training.data_service import _modes, main

    assert [(m.served, m.endless, m.shared_job) for m in _modes("local,distributed_epoch")] == \
        [(False, True, None), (True, False, "shared-distributed")]
    with pytest.raises(SystemExit):
        main(["--modes", "train,epochs"])
    assert "argument --modes: 'epochs' is no mode: use distributed_epoch, parallel_epochs" in capsys.readouterr().err
