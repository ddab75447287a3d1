"""The compiled quaternion kernels (mav_geometry._kernels) against the numpy reference."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from geometry_strategies import rotation_vectors, unit_quaternions, vectors
from hypothesis import given
from numpy.testing import assert_allclose
from scipy.spatial.transform import Rotation

from mav_geometry import _kernels as kernels  # an unbuilt extension fails here, not skips
from mav_geometry import quaternion as Q


@contextmanager
def kernels_set(module: object) -> Iterator[None]:
    """Run quaternion.py with ``module`` as its kernels (None: the numpy reference)."""
    saved = Q._kernels
    Q._kernels = module
    try:
        yield
    finally:
        Q._kernels = saved


def compiled_and_reference(function: Callable[..., np.ndarray], *args: np.ndarray
                           ) -> tuple[np.ndarray, np.ndarray]:
    with kernels_set(kernels):
        compiled = function(*args)
    with kernels_set(None):
        reference = function(*args)
    return compiled, reference


def assert_same(function: Callable[..., np.ndarray], *args: np.ndarray) -> None:
    """Same shape, values equal to round-off (libm and numpy sin/cos/atan2 may differ by an
    ulp)."""
    compiled, reference = compiled_and_reference(function, *args)
    assert compiled.shape == reference.shape
    assert_allclose(compiled, reference, rtol=1e-13, atol=1e-15)


def batch(size: int = 500, seed: int = 7) -> dict[str, np.ndarray]:
    """Random elements of every kind, with the special cases appended: identity, both signs
    of w, half turns, a zero rotation vector, tiny angles."""
    rng = np.random.default_rng(seed)
    quaternions = Rotation.random(size, rng=rng).as_quat()
    quaternions[::3] *= -1.0
    special = np.array([[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, -1.0], [1.0, 0.0, 0.0, 0.0],
                        [0.0, -1.0, 0.0, 0.0], [1e-9, 0.0, 0.0, 1.0], [0.6, 0.0, 0.8, 0.0]])
    quaternions = np.vstack([quaternions, special])
    rotvecs = Rotation.from_quat(quaternions).as_rotvec()
    rotvecs[:3] = [[0.0, 0.0, 0.0], [1e-12, 0.0, 0.0], [0.0, np.pi, 0.0]]
    return {"q": quaternions, "p": Rotation.random(len(quaternions), rng=rng).as_quat(),
            "v": rng.normal(size=(len(quaternions), 3)), "phi": rotvecs,
            "m": Rotation.from_quat(quaternions).as_matrix()}


@given(unit_quaternions(), unit_quaternions(), vectors(), rotation_vectors())
def test_single_elements_match_the_reference(p, q, v, phi):
    assert_same(Q.multiply, p, q)
    assert_same(Q.rotate, q, v)
    assert_same(Q.to_matrix, q)
    assert_same(Q.to_rotation_vector, q)
    assert_same(Q.from_rotation_vector, phi)
    assert_same(Q.from_matrix, Q.to_matrix(q))


def test_batches_match_the_reference_element_by_element():
    data = batch()
    assert_same(Q.multiply, data["p"], data["q"])
    assert_same(Q.rotate, data["q"], data["v"])
    assert_same(Q.to_matrix, data["q"])
    assert_same(Q.to_rotation_vector, data["q"])
    assert_same(Q.from_rotation_vector, data["phi"])
    assert_same(Q.from_matrix, data["m"])
    # a batch of batches keeps its shape
    assert_same(Q.to_matrix, data["q"][:500].reshape(10, 50, 4))


def test_special_rotations_are_exact():
    with kernels_set(kernels):
        assert_allclose(Q.to_rotation_vector([0.0, 0.0, 0.0, -1.0]), [0.0, 0.0, 0.0])
        assert_allclose(Q.to_rotation_vector([0.0, 0.0, 1.0, 0.0]), [0.0, 0.0, np.pi])
        assert_allclose(Q.from_rotation_vector([0.0, 0.0, 0.0]), [0.0, 0.0, 0.0, 1.0])
        assert_allclose(Q.from_matrix(np.diag([1.0, -1.0, -1.0])), [1.0, 0.0, 0.0, 0.0])


def test_broadcast_and_strided_inputs_take_the_reference_with_the_same_answer():
    data = batch(size=20)
    one = data["q"][0]
    strided = np.asfortranarray(data["q"])      # not C-contiguous
    assert not strided.flags.c_contiguous
    assert_same(Q.multiply, data["p"], one)     # broadcast (n, 4) * (4,)
    assert_same(Q.rotate, one, data["v"])
    assert_same(Q.to_matrix, strided)
    assert_same(Q.to_rotation_vector, data["q"][:, :])


def test_kernels_reject_bad_buffers():
    q = np.array([0.0, 0.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="to_matrix: input 0 holds 1 elements, output 2"):
        kernels.to_matrix(q, np.empty(18))
    with pytest.raises(ValueError, match="groups of 4"):
        kernels.to_rotation_vector(np.zeros(5), np.empty(3))
    with pytest.raises(ValueError, match="float64"):
        kernels.to_matrix(q.astype(np.float32), np.empty(9))
    with pytest.raises(TypeError):
        kernels.to_matrix(q, np.empty(9).tobytes())    # a read-only output
    with pytest.raises(ValueError, match="not C-contiguous"):
        kernels.rotate(q, np.zeros((3, 2))[:, 0], np.empty(3))   # strided input
    with pytest.raises(ValueError, match="cannot normalize"):
        kernels.from_matrix(np.full(9, np.nan), np.empty(4))
