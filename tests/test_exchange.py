"""Which exchange the tasks use: MPI where it is asked for or where it initialises, else the rendezvous."""

from __future__ import annotations

import pytest

from slurm_resolver import exchange
from slurm_resolver.errors import ConfigurationError
from slurm_resolver.exchange import ExchangeMode, LocalExchange, mpi_exchange, parse_mode
from slurm_resolver.launchers.base import Launch

SRUN_WITH_PMIX = Launch("srun", 4, 0, mpi_capable=True)
MPIRUN = Launch("openmpi", 4, 0, mpi_capable=True, mpi_launched=True)
SRUN = Launch("srun", 4, 0)


class BrokenMPI:
    def __init__(self, timeout: float = 60.0) -> None:
        raise ConfigurationError("mpi4py cannot load libmpi.so.40")


@pytest.mark.parametrize(("launch", "mode"), [(SRUN, "auto"), (SRUN_WITH_PMIX, "rendezvous"), (MPIRUN, "none")])
def test_no_mpi_where_it_is_not_wanted(launch: Launch, mode: str) -> None:
    assert mpi_exchange(launch, ExchangeMode(mode), 1.0) is None


def test_a_given_exchange_is_used_as_given() -> None:
    given = LocalExchange.group(1)[0]
    assert mpi_exchange(SRUN, given, 1.0) is given


def test_auto_in_an_srun_step_falls_back_to_the_rendezvous_where_mpi_does_not_initialise(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exchange, "MPIExchange", BrokenMPI)
    assert mpi_exchange(SRUN_WITH_PMIX, ExchangeMode.AUTO, 1.0) is None


@pytest.mark.parametrize(("launch", "mode"), [(SRUN_WITH_PMIX, "mpi"), (MPIRUN, "auto")])
def test_mpi_asked_for_or_needed_is_an_error_where_it_does_not_initialise(
        monkeypatch: pytest.MonkeyPatch, launch: Launch, mode: str) -> None:
    monkeypatch.setattr(exchange, "MPIExchange", BrokenMPI)
    with pytest.raises(ConfigurationError, match="libmpi"):
        mpi_exchange(launch, ExchangeMode(mode), 1.0)


def test_modes_are_checked_naming_their_source() -> None:
    with pytest.raises(ConfigurationError, match="SLURM_RESOLVER_EXCHANGE='tcp'"):
        parse_mode("tcp", "SLURM_RESOLVER_EXCHANGE")


def test_a_mode_is_parsed_once_into_its_enum_and_an_exchange_passes_as_given() -> None:
    given = LocalExchange.group(1)[0]
    assert [parse_mode(m) for m in ("auto", "mpi", "rendezvous", "none")] == list(ExchangeMode)
    assert parse_mode(ExchangeMode.MPI) is ExchangeMode.MPI and parse_mode(given) is given
    with pytest.raises(ConfigurationError, match="neither a mode nor an exchange"):
        parse_mode(3)
