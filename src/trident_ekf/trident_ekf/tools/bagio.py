"""rosbag2 (MCAP) reading and writing with rosbags: the standard messages the tools use.

A bag is a rosbag2 directory ``NAME/`` holding ``NAME_0.mcap`` and ``metadata.yaml``, the
layout ``ros2 bag record -s mcap`` produces. It is written into a hidden staging directory
next to it and moved into place only once complete, so a failed run leaves no partial bag.
Types that are not standard ROS 2 messages are read with the definitions a bag carries
(``bag_typestore``).

rosbags (its type stores, about 0.2 s, and its reader and writer) is imported on first use,
not with this module: a command's ``--help`` and its argument checks need none of it.
``TYPESTORE``, the standard ROS 2 (Jazzy) type store, is made on first access.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from mav_geometry.arrays import FloatVector
from trident_ekf.inputs import stamp_ns as stamp_ns  # re-exported for bag messages
from trident_ekf.tools.bag_reader import BagReader
from trident_ekf.tools.command import UsageError

if TYPE_CHECKING:
    from rosbags.interfaces import Qos
    from rosbags.rosbag2 import Writer
    from rosbags.typesys.store import Typestore

    TYPESTORE: Typestore


def standard_typestore() -> Typestore:
    """``TYPESTORE``, the standard ROS 2 (Jazzy) types: one store, made on first use (a
    test may replace the module attribute)."""
    store: Typestore | None = globals().get("TYPESTORE")
    if store is None:
        from rosbags.typesys import Stores, get_typestore

        store = globals()["TYPESTORE"] = get_typestore(Stores.ROS2_JAZZY)
    return store


def __getattr__(name: str) -> Typestore:
    """``TYPESTORE``: ``standard_typestore()`` (a module attribute made on first access)."""
    if name == "TYPESTORE":
        return standard_typestore()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


IMU = "sensor_msgs/msg/Imu"
NAVSATFIX = "sensor_msgs/msg/NavSatFix"
TWIST = "geometry_msgs/msg/TwistWithCovarianceStamped"
ODOMETRY = "nav_msgs/msg/Odometry"
VECTOR = "geometry_msgs/msg/Vector3Stamped"
DIAGNOSTICS = "diagnostic_msgs/msg/DiagnosticArray"
FLUID_PRESSURE = "sensor_msgs/msg/FluidPressure"
MAGNETIC_FIELD = "sensor_msgs/msg/MagneticField"

# Topics trident-import writes beside /imu/data, /gnss/fix, /gnss/vel, /reference/odometry.
BAROMETER_TOPIC = "/barometer/pressure"
MAGNETOMETER_TOPIC = "/magnetic_field"
IMPORT_SUMMARY_TOPIC = "/trident_import/summary"


def _types() -> dict[str, Any]:
    """Message classes by type name (the standard store's)."""
    return standard_typestore().types


def _header(stamp: int, frame_id: str) -> Any:
    types = _types()
    return types["std_msgs/msg/Header"](
        stamp=types["builtin_interfaces/msg/Time"](sec=int(stamp // 10**9),
                                                   nanosec=int(stamp % 10**9)),
        frame_id=frame_id)


def _vector(v: FloatVector) -> Any:
    x, y, z = (float(c) for c in v)
    return _types()["geometry_msgs/msg/Vector3"](x=x, y=y, z=z)


def imu_message(stamp: int, gyro: FloatVector, accel: FloatVector,
                frame_id: str = "imu_link") -> Any:
    """sensor_msgs/Imu: rate rad/s and specific force m/s^2 (FLU); orientation absent (-1)."""
    no_orientation = np.zeros(9)
    no_orientation[0] = -1.0
    types = _types()
    return types[IMU](header=_header(stamp, frame_id),
                      orientation=types["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0,
                                                                        w=1.0),
                      orientation_covariance=no_orientation, angular_velocity=_vector(gyro),
                      angular_velocity_covariance=np.zeros(9),
                      linear_acceleration=_vector(accel),
                      linear_acceleration_covariance=np.zeros(9))


def navsatfix_message(stamp: int, latitude: float, longitude: float, altitude: float,
                      covariance_enu: ArrayLike, frame_id: str = "gnss_link") -> Any:
    """NavSatFix: degrees, ellipsoidal altitude m, ENU covariance m^2 (type DIAGONAL_KNOWN)."""
    types = _types()
    status = types["sensor_msgs/msg/NavSatStatus"](status=0, service=1)
    return types[NAVSATFIX](header=_header(stamp, frame_id), status=status,
                            latitude=float(latitude), longitude=float(longitude),
                            altitude=float(altitude),
                            position_covariance=np.asarray(covariance_enu,
                                                           dtype=float).reshape(9),
                            position_covariance_type=2)


def twist_message(stamp: int, velocity_enu: FloatVector, covariance_enu: ArrayLike,
                  frame_id: str = "gnss_link") -> Any:
    """TwistWithCovarianceStamped: ENU velocity m/s, linear covariance 3x3 m^2/s^2."""
    covariance = np.zeros((6, 6))
    covariance[:3, :3] = np.asarray(covariance_enu, dtype=float)
    covariance[3:, 3:] = -np.eye(3)  # angular part unknown
    types = _types()
    twist = types["geometry_msgs/msg/Twist"](linear=_vector(velocity_enu),
                                             angular=_vector((0, 0, 0)))
    return types[TWIST](header=_header(stamp, frame_id),
                        twist=types["geometry_msgs/msg/TwistWithCovariance"](
                            twist=twist, covariance=covariance.reshape(36)))


def odometry_message(stamp: int, position: FloatVector, q_xyzw: FloatVector,
                     pose_covariance: ArrayLike, linear_body: FloatVector,
                     angular_body: FloatVector,
                     twist_covariance: ArrayLike, frame_id: str = "map",
                     child_frame_id: str = "base_link") -> Any:
    """nav_msgs/Odometry: pose in ``frame_id``, twist in the child (body) frame, 6x6 covariances
    ordered (x, y, z, rot x, rot y, rot z)."""
    x, y, z, w = (float(c) for c in q_xyzw)
    types = _types()
    pose = types["geometry_msgs/msg/Pose"](
        position=types["geometry_msgs/msg/Point"](**dict(zip("xyz", map(float, position),
                                                             strict=True))),
        orientation=types["geometry_msgs/msg/Quaternion"](x=x, y=y, z=z, w=w))
    twist = types["geometry_msgs/msg/Twist"](linear=_vector(linear_body),
                                             angular=_vector(angular_body))
    return types[ODOMETRY](
        header=_header(stamp, frame_id), child_frame_id=child_frame_id,
        pose=types["geometry_msgs/msg/PoseWithCovariance"](
            pose=pose, covariance=np.asarray(pose_covariance, dtype=float).reshape(36)),
        twist=types["geometry_msgs/msg/TwistWithCovariance"](
            twist=twist, covariance=np.asarray(twist_covariance, dtype=float).reshape(36)))


def fluid_pressure_message(stamp: int, pressure_pa: float, variance: float = 0.0,
                           frame_id: str = "baro_link") -> Any:
    """sensor_msgs/FluidPressure: static pressure in Pa, variance Pa^2 (0 means unknown)."""
    return _types()[FLUID_PRESSURE](header=_header(stamp, frame_id),
                                    fluid_pressure=float(pressure_pa), variance=float(variance))


def magnetic_field_message(stamp: int, field_T: FloatVector,
                           covariance: ArrayLike = (0.0,) * 9,
                           frame_id: str = "imu_link") -> Any:
    """sensor_msgs/MagneticField: field in tesla in the body (FLU) axes of ``frame_id``, 3x3
    covariance T^2 (all zeros means unknown)."""
    return _types()[MAGNETIC_FIELD](
        header=_header(stamp, frame_id), magnetic_field=_vector(field_T),
        magnetic_field_covariance=np.asarray(covariance, dtype=float).reshape(9))


def vector_message(stamp: int, vector: FloatVector, frame_id: str = "base_link") -> Any:
    return _types()[VECTOR](header=_header(stamp, frame_id), vector=_vector(vector))


def diagnostics_message(stamp: int, name: str, level: int, message: str,
                        values: dict[str, str]) -> Any:
    """DiagnosticArray with one status (level 0 OK, 1 WARN, 2 ERROR) and key/values."""
    types = _types()
    status = types["diagnostic_msgs/msg/DiagnosticStatus"](
        level=level, name=name, message=message, hardware_id="trident_ekf",
        values=[types["diagnostic_msgs/msg/KeyValue"](key=k, value=v) for k, v in values.items()])
    return types[DIAGNOSTICS](header=_header(stamp, ""), status=[status])


MCAP_SUFFIX = ".mcap"


class OutputExistsError(UsageError):
    """The output bag exists and may not (or cannot safely) be replaced."""


def bag_directory(path: Path) -> Path:
    """The rosbag2 directory an ``--output`` argument names: ``NAME.mcap`` means ``NAME/``
    (an output is a directory, not a single MCAP file)."""
    return path.with_suffix("") if path.suffix.lower() == MCAP_SUFFIX else path


def storage_file(directory: Path) -> Path:
    """The MCAP file inside a bag written by ``BagWriter``: ``NAME/NAME_0.mcap``."""
    return directory / f"{directory.name}_0{MCAP_SUFFIX}"


def bag_input(path: Path) -> Path | None:
    """The rosbag2 directory an input argument names, or None: the directory itself, the
    directory of a storage file inside it (``NAME/NAME_0.mcap``, also without
    metadata.yaml: a recording that was never closed), or ``NAME/`` for a
    ``NAME.mcap`` that does not exist (what ``--output NAME.mcap`` wrote)."""
    if path.is_dir():
        return path
    if path.is_file() and ((path.parent / "metadata.yaml").is_file()
                           or path.suffix.lower() == MCAP_SUFFIX):
        return path.parent
    directory = bag_directory(path)
    if directory != path and not path.exists() and (directory / "metadata.yaml").is_file():
        return directory
    return None


def _replaceable(path: Path) -> bool:
    """A rosbag2 directory (has metadata.yaml) or an empty directory: what --force removes."""
    return path.is_dir() and (
        (path / "metadata.yaml").is_file() or not any(path.iterdir()))


def check_output(path: Path, overwrite: bool = False) -> None:
    """Raise ``OutputExistsError`` unless a bag may be written at ``path``: it must not
    exist, or ``overwrite`` is set and it is a bag directory (or empty)."""
    if not (path.exists() or path.is_symlink()):
        return
    if not overwrite:
        raise OutputExistsError(f"output {path} already exists; use --force to replace it "
                                "or choose another --output")
    if not _replaceable(path):
        raise OutputExistsError(f"output {path} exists and is not a rosbag2 directory (no "
                                "metadata.yaml); --force only replaces bags, so remove it "
                                "yourself or choose another --output")


class BagWriter:
    """rosbag2 MCAP writer that registers a topic on its first message.

    ``path`` is the bag directory (see ``bag_directory`` for a ``.mcap`` argument). It must
    not exist unless ``overwrite`` is set, in which case an existing bag there is replaced
    when the new one is complete (``check_output``)."""

    def __init__(self, path: Path, overwrite: bool = False) -> None:
        self.path = Path(os.path.abspath(path))
        if not self.path.name:
            raise ValueError(f"output {path} does not name a directory to create")
        self._overwrite = overwrite
        check_output(self.path, overwrite)
        self._staging: Path | None = None
        self._writer: Writer | None = None
        self._connections: dict[str, Any] = {}

    def __enter__(self) -> BagWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._staging = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.", suffix=".partial",
                                              dir=self.path.parent))
        # rosbags names the storage file after its directory: stage as NAME_0/NAME_0.mcap,
        # then move the directory to NAME (metadata.yaml only names the file).
        from rosbags.rosbag2 import StoragePlugin, Writer

        self._writer = Writer(self._staging / storage_file(self.path).stem, version=8,
                              storage_plugin=StoragePlugin.MCAP)
        try:
            self._writer.open()
        except BaseException:
            shutil.rmtree(self._staging, ignore_errors=True)
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        assert self._writer is not None
        assert self._staging is not None
        try:
            if kind is None:
                self._writer.close()
                self._install(self._staging / storage_file(self.path).stem)
            else:  # the bag is discarded: only release the file
                with contextlib.suppress(Exception):
                    self._writer.close()
        finally:
            shutil.rmtree(self._staging, ignore_errors=True)

    def _install(self, bag: Path) -> None:
        """Move the finished bag to ``self.path``. An old bag there is first moved aside into
        the staging directory (deleted afterwards) and put back if the move fails."""
        check_output(self.path, self._overwrite)  # again: it may have appeared meanwhile
        aside = None
        if self.path.exists() or self.path.is_symlink():
            aside = bag.parent / "replaced"
            os.replace(self.path, aside)
        try:
            os.replace(bag, self.path)
        except OSError:
            if aside is not None:
                os.replace(aside, self.path)
            raise

    def write(self, topic: str, msgtype: str, stamp: int, message: Any) -> None:
        self.write_cdr(topic, msgtype, stamp,
                       standard_typestore().serialize_cdr(message, msgtype))

    def add_topic(self, topic: str, msgtype: str, typestore: Typestore | None = None,
                  qos: Sequence[Qos] = ()) -> None:
        """Register ``topic`` with its offered QoS and a typestore that knows ``msgtype``
        (default and what a topic written without this gets: the standard types, no QoS)."""
        assert self._writer is not None, "BagWriter is used as a context manager"
        self._connections[topic] = self._writer.add_connection(
            topic, msgtype, typestore=typestore or standard_typestore(),
            offered_qos_profiles=qos)

    def write_cdr(self, topic: str, msgtype: str, stamp: int,
                  data: bytes | memoryview) -> None:
        """Write an already serialized (CDR) message."""
        if topic not in self._connections:
            self.add_topic(topic, msgtype)
        assert self._writer is not None
        self._writer.write(self._connections[topic], stamp, data)


def read_raw(path: Path | BagReader,
             topics: Sequence[str]) -> Iterator[tuple[str, str, int, bytes]]:
    """(topic, message type, bag time ns, CDR bytes) for the given topics, in bag-time order,
    streaming (``BagReader``: also from a damaged bag)."""
    reader = path if isinstance(path, BagReader) else BagReader(path)
    yield from reader.raw(topics)


def read_messages(path: Path | BagReader,
                  topics: Sequence[str]) -> Iterator[tuple[str, int, Any]]:
    """(topic, bag time ns, message) for the given topics, in bag-time order, streaming."""
    for topic, msgtype, timestamp, raw in read_raw(path, topics):
        yield topic, timestamp, standard_typestore().deserialize_cdr(raw, msgtype)


def topic_types(path: Path | BagReader) -> dict[str, tuple[str, int]]:
    """Message type and count per topic."""
    return (path if isinstance(path, BagReader) else BagReader(path)).topics


def bag_typestore(path: Path | BagReader, msgtypes: Iterable[str]) -> Typestore:
    """A typestore that deserializes ``msgtypes`` of the bag at ``path``: ``TYPESTORE`` when
    it knows them all (the standard ROS 2 types), else a new standard store plus the
    definitions the bag carries of the others (rosbag2 MCAP keeps each connection's message
    definition, so e.g. px4_msgs need not be installed to read a PX4 bag). ValueError naming
    the types neither knows or whose definition cannot be read."""
    from rosbags.interfaces import MessageDefinitionFormat
    from rosbags.interfaces.typing import Typesdict
    from rosbags.typesys import (
        Stores,
        TypesysError,
        get_types_from_idl,
        get_types_from_msg,
        get_typestore,
    )

    standard = standard_typestore()
    missing = sorted({t for t in msgtypes if t not in standard.fielddefs})
    if not missing:
        return standard
    store = get_typestore(Stores.ROS2_JAZZY)
    reader = path if isinstance(path, BagReader) else BagReader(path)
    definitions = {msgtype: msgdef for msgtype, msgdef in reader.definitions.items()
                   if msgtype in missing and msgdef.format != MessageDefinitionFormat.NONE}
    types: Typesdict = {}
    for msgtype, msgdef in sorted(definitions.items()):
        try:
            parsed = (get_types_from_msg(msgdef.data, msgtype)
                      if msgdef.format == MessageDefinitionFormat.MSG
                      else get_types_from_idl(msgdef.data))
        except TypesysError as error:
            raise ValueError(f"cannot read the bag's definition of {msgtype}: {error}") from None
        types.update((name, fields) for name, fields in parsed.items()
                     if name not in store.fielddefs)
    try:
        store.register(types)
    except TypesysError as error:
        raise ValueError(f"cannot register the bag's message definitions: {error}") from None
    unresolved = [t for t in missing if t not in store.fielddefs]
    if unresolved:
        raise ValueError(f"cannot read {', '.join(unresolved)}: not a standard ROS 2 type and "
                         "the bag carries no definition of it (a rosbag2 MCAP bag does)")
    return store


def topic_counts(path: Path | BagReader) -> dict[str, int]:
    """Message count per topic."""
    return {topic: count for topic, (_, count) in topic_types(path).items()}
