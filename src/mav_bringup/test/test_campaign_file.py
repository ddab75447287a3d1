"""Campaign files (``mav_bringup.campaign.campaign_file``): every schema error is one message
naming the file and the entry, parameters are checked against the nodes' own
specifications, and the expansion into runs has the right count and stable identities."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from mav_bringup.campaign.campaign_file import (
    CampaignError,
    count_runs,
    expand,
    find_campaign,
    load_campaign,
)
from mav_ros_common.resources import find_named_file

BASE: dict[str, Any] = {"name": "test", "duration_s": 5.0, "vehicles": ["quadrotor_x"],
                        "scenarios": ["calm"], "seeds": [0]}


def write(folder: Path, document: Any, name: str = "campaign.yaml") -> Path:
    path = folder / name
    path.write_text(document if isinstance(document, str) else yaml.safe_dump(document))
    return path


def with_(**changes: Any) -> dict[str, Any]:
    return BASE | changes


ERRORS = [
    ("not a mapping", [1, 2], "must be a mapping with keys name, description"),
    ("invalid YAML", "name: [", "not valid YAML"),
    ("unknown key", with_(seed=[1]), "unknown key 'seed' (did you mean 'seeds'?)"),
    ("bad name", with_(name="My Campaign"),
     "name = 'My Campaign' must be 1-64 characters of a-z, 0-9, '_' and '-'"),
    ("no name", {"duration_s": 5.0}, "name = None must be 1-64 characters"),
    ("duration", with_(duration_s=-1), "duration_s = -1 must be a number in [0.001, 86400.0]"),
    ("duration text", with_(duration_s="long"), "duration_s = 'long' must be a number"),
    ("trajectory", with_(trajectory="circle"),
     "trajectory: parameter 'trajectory' = 'circle' is invalid: must be one of"),
    ("vehicle name", with_(vehicles=["quadrotor_y"]),
     "vehicles[0]: no vehicle file 'quadrotor_y'"),
    ("vehicle twice", with_(vehicles=["hexarotor", "hexarotor"]),
     "vehicles = ['hexarotor', 'hexarotor'] names one entry twice"),
    ("empty vehicles", with_(vehicles=[]), "vehicles = [] must be a name or a non-empty list"),
    ("scenario path", with_(scenarios=["missing/windy.yaml"]),
     "scenarios[0]: scenario file"),
    ("seeds key", with_(seeds={"start": 0, "cuont": 3}),
     "seeds: unknown key 'cuont' (did you mean 'count'?)"),
    ("seed repeated", with_(seeds=[1, 1]), "seeds = [1, 1] names one seed twice"),
    ("seed negative", with_(seeds=[-1]), "seeds[0] = -1 must be an integer in [0, 2147483647]"),
    ("seed count", with_(seeds={"start": 0, "count": 0}),
     "seeds.count = 0 must be an integer in [1, 1000000]"),
    ("node", with_(overrides={"trident-ekf.gyro_noise": 1e-3}),
     "overrides: unknown node 'trident-ekf' (did you mean 'trident_ekf'?)"),
    ("not NODE.PARAM", with_(overrides={"gyro_noise": 1e-3}),
     "overrides: 'gyro_noise' must be NODE.PARAM, NODE one of simulator, controller, "
     "trident_ekf"),
    ("parameter name", with_(overrides={"trident_ekf.gyro_nosie": 1e-3}),
     "overrides: node trident_ekf has no parameter 'gyro_nosie' (did you mean 'gyro_noise'?)"),
    ("parameter range", with_(overrides={"trident_ekf.gyro_noise": 5.0}),
     "overrides: trident_ekf.gyro_noise: parameter 'gyro_noise' = 5.0 is invalid: must be a "
     "number in"),
    ("parameter type", with_(overrides={"controller.rate_hz": "fast"}),
     "parameter 'rate_hz' = 'fast' is invalid"),
    ("reserved", with_(overrides={"simulator.seed": 3}),
     "simulator.seed is set by the campaign's 'seeds' key"),
    ("overrides list", with_(overrides=[1]), "overrides must be a mapping of NODE.PARAM"),
    ("grid empty", with_(grid={"trident_ekf.gyro_noise": []}),
     "grid: trident_ekf.gyro_noise = [] must be a non-empty list of values"),
    ("grid repeat", with_(grid={"trident_ekf.gyro_noise": [1e-3, 1e-3]}),
     "grid: trident_ekf.gyro_noise = [0.001, 0.001] has a value twice"),
    ("grid value", with_(grid={"trident_ekf.gyro_noise": [1e-3, -1.0]}),
     "grid: trident_ekf.gyro_noise[1]: parameter 'gyro_noise' = -1.0 is invalid"),
    ("twice", with_(overrides={"trident_ekf.gyro_noise": 1e-3},
                    grid={"trident_ekf.gyro_noise": [2e-3]}),
     "trident_ekf.gyro_noise is given in more than one of overrides, grid and random"),
    ("draws", with_(random={"draws": 0, "parameters": {"trident_ekf.gyro_noise": {
        "uniform": [1e-3, 2e-3]}}}), "random.draws = 0 must be an integer in [1, 1000000]"),
    ("random key", with_(random={"draws": 2, "sed": 1, "parameters": {}}),
     "random: unknown key 'sed' (did you mean 'seed'?)"),
    ("no draws", with_(random={"draws": 2, "parameters": {}}),
     "random.parameters: give at least one parameter to draw"),
    ("distribution", with_(random={"draws": 2, "parameters": {
        "trident_ekf.gyro_noise": {"log_uniforn": [1e-3, 2e-3]}}}),
     "unknown distribution 'log_uniforn' (did you mean 'log_uniform'?)"),
    ("bounds order", with_(random={"draws": 2, "parameters": {
        "trident_ekf.gyro_noise": {"log_uniform": [2e-3, 1e-3]}}}),
     "log_uniform = [0.002, 0.001] must be finite with 0 < low <= high"),
    ("bound range", with_(random={"draws": 2, "parameters": {
        "trident_ekf.accel_noise": {"uniform": [0.01, 50.0]}}}),
     "uniform[1]: parameter 'accel_noise' = 50.0 is invalid"),
    ("integer drawn", with_(random={"draws": 2, "parameters": {
        "trident_ekf.covariance_decimation": {"uniform": [1, 4]}}}),
     "uniform draws real numbers; parameter covariance_decimation is not real-valued "
     "(use choice)"),
    ("choice value", with_(random={"draws": 2, "parameters": {
        "trident_ekf.filter": {"choice": ["trident", "ukf"]}}}),
     "choice[1]: parameter 'filter' = 'ukf' is invalid"),
    ("rank_by", with_(rank_by=3), "rank_by = 3 must be a metric name"),
    ("repeated draws", with_(random={"draws": 3, "parameters": {
        "trident_ekf.filter": {"choice": ["trident", "baseline"]}}}),
     "random draws repeat a parameter set (the same runs twice)"),
    ("too many runs", with_(vehicles=["quadrotor_x", "hexarotor"],
                            seeds={"start": 0, "count": 1000000}),
     "expands to 2000000 runs, more than 1000000"),
]


@pytest.mark.parametrize(("case", "document", "message"), ERRORS, ids=[e[0] for e in ERRORS])
def test_schema_errors_name_file_and_entry(tmp_path: Path, case: str, document: Any,
                                           message: str) -> None:
    path = write(tmp_path, document)
    with pytest.raises(CampaignError) as caught:
        load_campaign(path)
    text = str(caught.value)
    assert text.startswith(f"campaign file {path}"), text
    assert message in text, text
    assert "\n" not in text


def test_huge_values_are_cut_in_messages(tmp_path: Path) -> None:
    huge = "x" * 100_000
    for document in (with_(name=huge), with_(overrides={huge: 1}), with_(vehicles=[1] * 1000),
                     with_(**{huge: 1}), with_(overrides={"trident_ekf.filter": [huge]})):
        with pytest.raises(CampaignError) as caught:
            load_campaign(write(tmp_path, document))
        assert len(str(caught.value)) < 600, str(caught.value)[:200]


def test_bad_scenario_file_is_named(tmp_path: Path) -> None:
    write(tmp_path, {"events": [{"type": "gnss_outage"}]}, "bad_scenario.yaml")
    with pytest.raises(CampaignError, match=r"scenarios\[0\]: bad_scenario: events\[0\]: "
                                            "gnss_outage needs start_s"):
        load_campaign(write(tmp_path, with_(scenarios=["bad_scenario.yaml"])))


def test_paths_are_relative_to_the_campaign_file(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "vehicles").mkdir()
    shutil.copy(find_named_file("hexarotor", "vehicles"), tmp_path / "vehicles" / "mine.yaml")
    path = write(tmp_path, with_(vehicles=["vehicles/mine.yaml", "quadrotor_x"]))
    monkeypatch.chdir("/")
    campaign = load_campaign(path)
    mine, named = campaign.vehicles
    assert (mine.label, mine.reference) == ("vehicles/mine.yaml",
                                            str(tmp_path / "vehicles" / "mine.yaml"))
    assert (named.label, named.reference) == ("quadrotor_x", "quadrotor_x")


def test_expansion_count_order_and_groups(tmp_path: Path) -> None:
    campaign = load_campaign(write(tmp_path, with_(
        vehicles=["quadrotor_x", "hexarotor"], scenarios=["calm", "gusty"],
        trajectory=["figure_eight", "hover"], seeds={"start": 5, "count": 3},
        overrides={"trident_ekf.output_rate_hz": 50},
        grid={"trident_ekf.gyro_noise": [1e-3, 2e-3],
              "trident_ekf.gnss.accuracy_scale": [0.5, 1.0, 2.0]},
        random={"draws": 2, "seed": 7, "parameters": {
            "trident_ekf.accel_noise": {"log_uniform": [1e-3, 1e-1]},
            "trident_ekf.filter": {"choice": ["trident", "baseline"]}}})))
    runs = expand(campaign)
    assert len(runs) == count_runs(campaign) == 2 * 2 * 2 * (2 * 3 * 2) * 3
    assert len({run.run_id for run in runs}) == len(runs)
    groups: dict[str, list[int]] = {}
    for run in runs:
        groups.setdefault(run.config_hash, []).append(run.seed)
    assert len(groups) == len(runs) // 3
    assert all(seeds == [5, 6, 7] for seeds in groups.values())  # a set's seeds side by side
    first = runs[0]
    assert (first.vehicle.label, first.scenario.label, first.trajectory) == (
        "quadrotor_x", "calm", "figure_eight")
    parameters = dict(first.parameters)
    assert parameters["trident_ekf.output_rate_hz"] == 50.0  # checked: a float parameter
    assert isinstance(parameters["trident_ekf.output_rate_hz"], float)
    assert (parameters["trident_ekf.gyro_noise"], parameters[
        "trident_ekf.gnss.accuracy_scale"]) == (1e-3, 0.5)
    assert first.overrides()["trident_ekf"]["gyro_noise"] == 1e-3
    draws = [(dict(run.parameters)["trident_ekf.accel_noise"],
              dict(run.parameters)["trident_ekf.filter"]) for run in runs]
    assert len(set(draws)) == 2  # two draws, shared by every grid combination
    assert all(1e-3 <= noise <= 1e-1 for noise, _ in draws)
    again = expand(load_campaign(write(tmp_path, yaml.safe_load(campaign.text))))
    assert [run.run_id for run in again] == [run.run_id for run in runs]


def test_shipped_campaigns() -> None:
    counts = {"smoke": 4, "consistency": 200, "tuning": 80}
    for name, count in counts.items():
        campaign = load_campaign(find_campaign(name))
        assert campaign.name == name
        assert count_runs(campaign) == len(expand(campaign)) == count
    consistency = load_campaign(find_campaign("consistency"))
    assert [v.label for v in consistency.vehicles] == [
        "quadrotor_x", "quadrotor_plus", "hexarotor", "tilted_hexarotor"]
    assert [s.label for s in consistency.scenarios] == [
        "calm", "gusty", "gnss_outage_30s", "spoofing_jump", "sensor_faults"]
    assert consistency.seeds == tuple(range(10))
    assert consistency.duration_s == 60.0
    assert not consistency.overrides
    assert not consistency.grid
    assert consistency.random is None
    with pytest.raises(CampaignError, match="no campaign file 'consistancy'"):
        find_campaign("consistancy")


def test_run_ids_are_stable_and_change_with_every_input(tmp_path: Path) -> None:
    smoke = expand(load_campaign(find_campaign("smoke")))
    # Pinned: output directories of earlier campaigns resume by these ids.
    assert (smoke[0].run_id, smoke[0].config_hash) == ("5328c7c866c0", "306f4ec1e6e0")
    base = with_(grid={"trident_ekf.gyro_noise": [1e-3]}, seeds=[0])
    variants = [base, with_(**{**base, "vehicles": ["hexarotor"]}),
                with_(**{**base, "scenarios": ["gusty"]}),
                with_(**{**base, "trajectory": "hover"}),
                with_(**{**base, "duration_s": 6.0}),
                with_(**{**base, "grid": {"trident_ekf.gyro_noise": [1.5e-3]}}),
                with_(**{**base, "overrides": {"controller.rate_hz": 200.0}}),
                with_(**{**base, "seeds": [1]})]
    runs = [expand(load_campaign(write(tmp_path, v, f"v{i}.yaml")))[0]
            for i, v in enumerate(variants)]
    assert len({run.run_id for run in runs}) == len(variants)
    assert len({run.config_hash for run in runs}) == len(variants) - 1
    assert runs[-1].config_hash == runs[0].config_hash  # the seed alone: one parameter set
    # A value is identified as the node takes it: 1 and 1.0 are the same float parameter.
    as_integer = with_(**{**base, "overrides": {"controller.rate_hz": 200}})
    assert expand(load_campaign(write(tmp_path, as_integer, "int.yaml")))[0].run_id == \
        runs[6].run_id


def test_random_draws_are_reproducible_and_in_bounds(tmp_path: Path) -> None:
    document = with_(random={"draws": 50, "seed": 3, "parameters": {
        "trident_ekf.accel_noise": {"log_uniform": [1e-3, 1e-1]},
        "controller.figure_eight_period_s": {"uniform": [8.0, 16.0]}}})
    first, second = (expand(load_campaign(write(tmp_path, document, f"{i}.yaml")))
                     for i in range(2))
    values = [dict(run.parameters) for run in first]
    assert values == [dict(run.parameters) for run in second]
    noise = [v["trident_ekf.accel_noise"] for v in values]
    period = [v["controller.figure_eight_period_s"] for v in values]
    assert all(1e-3 <= x <= 1e-1 for x in noise)
    assert all(8.0 <= x <= 16.0 for x in period)
    # log-uniform: about as many draws in each decade.
    below = sum(x < 1e-2 for x in noise)
    assert 15 <= below <= 35
