"""The cores the graph's nodes run, built from their settings as the nodes build them: the
vehicle simulator (``variational_sim.ros.vehicle_setup``), the estimation session with its
output schedule and the inputs its profile subscribes, and the flight control of the
controller node (``mav_dynamics.flight``)."""

from __future__ import annotations

from dataclasses import dataclass

from mav_bringup.pipeline.node_parameters import CONTROLLER, ESTIMATOR, GraphParameters
from mav_bringup.pipeline.sensor_feed import SensorFeed
from mav_dynamics import flight
from mav_dynamics.model import TreeModel
from mav_dynamics.vehicle_file import load_vehicle
from mav_geometry.shown import shown
from mav_ros_common.parameters import ParameterError
from mav_ros_common.resources import ShareNotFoundError, find_named_file
from trident_ekf.adapters import build_profile
from trident_ekf.core.measurements import build_sources
from trident_ekf.core.session import EstimationSession, OutputSchedule
from trident_ekf.ros.parameters import FILTERS
from variational_sim.ros.vehicle_setup import vehicle_simulator
from variational_sim.vehicle_sim.simulator import VehicleSimulator


@dataclass
class Cores:
    """One vehicle's closed loop: simulator, estimator (with the odometry decimation of its
    node and the wiring of its inputs) and flight control."""

    simulator: VehicleSimulator
    session: EstimationSession
    schedule: OutputSchedule
    feed: SensorFeed
    flight: flight.FlightControl


def _node_error(node: str, error: ValueError) -> ParameterError:
    name = error.name if isinstance(error, ParameterError) else None
    return ParameterError(f"node '{node}': {error}", name)


def build_simulator(parameters: GraphParameters) -> VehicleSimulator:
    """The simulator node's vehicle (one: the pipeline flies a single vehicle)."""
    values, settings = parameters.simulator.values, parameters.simulator.settings
    if settings.vehicles:
        raise ParameterError("node 'simulator': parameter 'vehicles' = "
                             f"{shown(values['vehicles'])}: the pipeline flies one vehicle "
                             "(leave it empty)", "vehicles")
    try:
        return vehicle_simulator(settings.config, values["scenario"])
    except ValueError as error:
        raise _node_error("simulator", error) from None


def build_session(parameters: GraphParameters) -> tuple[EstimationSession, OutputSchedule]:
    """The estimator node's session and odometry schedule."""
    values, settings = parameters.estimator.values, parameters.estimator.settings
    filter_ = FILTERS[values["filter"]](settings.filter_config, build_sources(settings.aiding))
    session = EstimationSession(filter_, settings.initializer, settings.datum,
                                settings.imu_rotation, settings.gnss_receiver,
                                settings.yaw_estimator)
    return session, OutputSchedule(values["output_rate_hz"])


def build_flight(parameters: GraphParameters) -> flight.FlightControl:
    """The controller node's flight control (its vehicle file, gains and mission)."""
    values, settings = parameters.controller.values, parameters.controller.settings
    name = values["vehicle_file"]
    try:
        model = TreeModel(load_vehicle(find_named_file(name, "vehicles")))
    except (ValueError, ShareNotFoundError) as error:
        raise ParameterError(f"node '{CONTROLLER}': parameter 'vehicle_file' = {shown(name)} "
                             f"is invalid: {error}", "vehicle_file") from None
    try:
        gains = flight.resolve_gains(model.vehicle, settings.gain_overrides)
        return flight.FlightControl(
            model, gains, settings.mission, plan_name=values["trajectory"],
            rate_hz=values["rate_hz"], takeoff_delay_s=values["takeoff_delay_s"],
            takeoff_duration_s=values["takeoff_duration_s"], speed_mps=values["speed_mps"])
    except ValueError as error:
        raise _node_error(CONTROLLER, error) from None


def build_cores(parameters: GraphParameters) -> Cores:
    """Every core of the loop; ValueError (``ParameterError``) naming the node at fault."""
    simulator = build_simulator(parameters)
    session, schedule = build_session(parameters)
    settings = parameters.estimator.settings
    try:
        inputs = build_profile(settings.inputs).selected(settings.aiding)
        feed = SensorFeed(simulator.sensors, inputs)
    except ValueError as error:
        raise _node_error(ESTIMATOR, error) from None
    return Cores(simulator, session, schedule, feed, build_flight(parameters))
