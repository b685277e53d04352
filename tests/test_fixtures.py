"""Fixtures: a marker resting at unknown world points or on an unknown plane, no measuring device.

Ground truth written here, independently of the calibration code: a perturbed
iiwa written as a URDF, a ball at an offset from its flange, configurations
that put the ball exactly in two sockets 50 mm apart and on a tilted plane,
found by Newton's method on Pinocchio's forward kinematics of that URDF.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pinocchio as pin
import pytest

import workbench as wb
from workbench.calibration.fitting.kinematic import KinematicProblem, calibrate_kinematic
from workbench.calibration.simulation.simulate import perturbed_truth
from workbench.recordings.log import Distance, Fixture, Log, Marker

BALL = np.array([0.02, -0.015, 0.06])  # the ball's centre in the flange frame (m)
HOME = np.array([0.3, 0.7, -0.2, -1.3, 0.2, 0.9, 0.4])


@pytest.fixture(scope="module")
def iiwa() -> wb.Chain:
    return wb.models.load("iiwa")


class Truth:
    """Pinocchio forward kinematics of the ball on the truth URDF, and Newton on it."""

    def __init__(self, urdf, frame: str) -> None:
        self.model = pin.buildModelFromUrdf(str(urdf))
        self.data = self.model.createData()
        self.frame = self.model.getFrameId(frame)

    def ball(self, q: np.ndarray) -> np.ndarray:
        pin.framesForwardKinematics(self.model, self.data, q)
        return self.data.oMf[self.frame].act(BALL)

    def balls(self, Q: np.ndarray) -> np.ndarray:
        return np.array([self.ball(q) for q in Q])

    def solve(self, q: np.ndarray, error) -> np.ndarray:
        """Newton (minimum-norm steps, Jacobian by central differences) on ``error(ball)``."""
        for _ in range(40):
            e = error(self.ball(q))
            if np.abs(e).max() < 1e-14:
                return q
            J = np.stack(
                [
                    (error(self.ball(q + h)) - error(self.ball(q - h))) / 2e-7
                    for h in 1e-7 * np.eye(q.size)
                ],
                axis=1,
            )
            q = q - np.linalg.lstsq(J.reshape(e.size, -1), e, rcond=None)[0]
        raise AssertionError("Newton did not converge")


@pytest.fixture(scope="module")
def scene(iiwa, tmp_path_factory):
    """Configurations with the ball in socket 0, socket 1 (50 mm apart) and on a plane."""
    truth = perturbed_truth(iiwa, "kinematic", 1e-2, seed=5).chain
    urdf = wb.write_urdf(truth, tmp_path_factory.mktemp("truth") / "truth.urdf")
    model = Truth(urdf, iiwa.tool_name)
    rng = np.random.default_rng(3)
    c0 = model.ball(HOME)
    c1 = c0 + 0.05 * np.array([0.6, 0.8, 0.0])
    normal = np.array([0.2, -0.1, 1.0]) / np.linalg.norm([0.2, -0.1, 1.0])
    offset = normal @ c0 - 0.08
    Q, kinds = [], []
    for kind, error in (
        (0, lambda p: p - c0),
        (1, lambda p: p - c1),
        (2, lambda p: np.array([normal @ p - offset])),
    ):
        for _ in range(20):
            Q.append(model.solve(HOME + rng.normal(scale=0.35, size=7), error))
            kinds.append(kind)
    return truth, model, np.array(Q), np.array(kinds), (c0, c1, normal, offset)


def fixture_log(scene, distance: bool = True, plane: bool = True) -> Log:
    _, _, Q, kinds, _ = scene
    keep = kinds < (3 if plane else 2)
    Q, kinds = Q[keep], kinds[keep]
    fixtures = [Fixture("socket_0", "point", "ball", kinds == 0),
                Fixture("socket_1", "point", "ball", kinds == 1)]  # fmt: skip
    if plane:
        fixtures.append(Fixture("table", "plane", "ball", kinds == 2))
    return Log(
        t=np.arange(len(Q), dtype=float), q=Q, markers=(Marker("ball", None),),
        fixtures=tuple(fixtures),
        distances=(Distance(("socket_0", "socket_1"), 0.05),) if distance else (),
    )  # fmt: skip


def pairwise(points: np.ndarray) -> np.ndarray:
    """Distances between all pairs of points (N, 3): the shape, whatever the world placement."""
    return np.linalg.norm(points[:, None] - points[None], axis=-1)


def predicted_balls(problem: KinematicProblem, fit, Q: np.ndarray) -> np.ndarray:
    other = replace(problem, q=Q, fixtures=())
    return other.predict(fit.model)[0][0]


def test_fixtures_recovered_exactly(iiwa, scene):
    """Noise-free sockets and plane: the residuals vanish, the sockets are 50 mm apart, and
    the ball in 30 configurations never seen is where the truth puts it, up to the world
    placement (all distances between the predicted centres equal the truth's to 1e-9 m)."""
    _, model, _, _, (c0, c1, normal, offset) = scene
    problem = KinematicProblem.from_log(fixture_log(scene))
    fit = calibrate_kinematic(iiwa, problem)
    assert np.abs(problem.residual(fit.model)).max() < 1e-10
    points = fit.model.fixtures
    assert abs(np.linalg.norm(points[0, :3] - points[1, :3]) - 0.05) < 1e-10
    # the socket-plane distances are the truth's too (a shape, seen from the fitted world)
    n, d = points[2, :3], points[2, 3]
    assert abs(abs(n @ points[0, :3] - d) - abs(normal @ c0 - offset)) < 1e-9
    assert abs(abs(n @ points[1, :3] - d) - abs(normal @ c1 - offset)) < 1e-9
    Q = HOME + np.random.default_rng(9).normal(scale=0.6, size=(30, 7))
    error = pairwise(predicted_balls(problem, fit, Q)) - pairwise(model.balls(Q))
    assert np.abs(error).max() < 1e-9
    assert np.abs(iiwa.twists - fit.chain.twists).max() > 1e-3  # it did move the joints


def test_without_a_distance_the_scale_is_held(iiwa, scene):
    """Sockets without their distance: the shape is recovered, at the scale the fit held (one
    ratio for every distance between predicted centres), and the summary says so."""
    _, model, _, _, _ = scene
    log = fixture_log(scene, distance=False, plane=False)
    problem = KinematicProblem.from_log(log)
    fit = calibrate_kinematic(iiwa, problem)
    assert np.abs(problem.residual(fit.model)).max() < 1e-10
    Q = HOME + np.random.default_rng(10).normal(scale=0.6, size=(30, 7))
    upper = np.triu_indices(30, 1)
    ratio = pairwise(predicted_balls(problem, fit, Q))[upper] / pairwise(model.balls(Q))[upper]
    assert np.ptp(ratio) < 1e-8
    assert abs(ratio.mean() - 1.0) > 1e-6  # the nominal's scale, not the truth's


def gauge_moved(problem: KinematicProblem, model, G: np.ndarray):
    """The model with the robot, its markers and the fixtures moved by G in the world."""
    chain = model.chain.with_eta(np.tile(wb.lie.log_se3(G), model.chain.n + 1))
    states = model.fixtures.copy()
    for f, fixture in enumerate(problem.fixtures):
        if fixture.kind == "point":
            states[f, :3] = G[:3, :3] @ states[f, :3] + G[:3, 3]
        else:
            n = G[:3, :3] @ states[f, :3]
            states[f] = [*n, states[f, 3] + n @ G[:3, 3]]
    return replace(model.with_chain(chain), placements=G @ model.placements, fixtures=states)


def test_the_gauge_stated_is_what_the_data_cannot_see(iiwa, scene):
    """Moving the robot, the ball and the fixtures together by a rigid motion leaves every
    residual's size as it was (scalars equal, socket errors rotated), and at the exact fit
    those six directions are exactly the directions the residuals do not see: the null space
    of the Jacobian on the candidate directions has dimension 6 with a distance (7 without:
    the scale too), as many as the fit holds."""
    for distance, held in ((True, 6), (False, 7)):
        problem = KinematicProblem.from_log(fixture_log(scene, distance=distance))
        fit = calibrate_kinematic(iiwa, problem)
        for seed in range(3):  # at the fit and at a model with large residuals
            model = fit.model if seed == 0 else problem.start(iiwa)
            rng = np.random.default_rng(seed)
            G = wb.lie.exp_se3(np.concatenate([rng.normal(scale=0.4, size=3),
                                               rng.normal(scale=0.3, size=3)]))  # fmt: skip
            r, moved = problem.residual(model), problem.residual(gauge_moved(problem, model, G))
            sockets = 3 * int(sum(f.rows.sum() for f in problem.fixtures if f.kind == "point"))
            assert np.allclose(
                np.linalg.norm(r[:sockets].reshape(-1, 3), axis=1),
                np.linalg.norm(moved[:sockets].reshape(-1, 3), axis=1), rtol=0, atol=1e-12,
            )  # fmt: skip
            assert np.allclose(r[sockets:], moved[sockets:], rtol=0, atol=1e-12)
        P, _ = problem.prior(fit.model)
        _, J = problem.evaluate(fit.model)
        JP = J @ P
        s = np.linalg.svd(JP / np.linalg.norm(JP, axis=0), compute_uv=False)
        assert int(np.sum(s < 1e-8 * s[0])) == held
        assert P.shape[1] - problem.free(fit.model, P).shape[1] == held


def test_residual_jacobian_matches_central_differences(iiwa, scene):
    """The fixtures' rows of the Jacobian (points, plane, distance) against central
    differences of the residuals through the problem's own steps."""
    problem = KinematicProblem.from_log(fixture_log(scene))
    model = problem.start(iiwa)
    _, J = problem.evaluate(model)
    P, _ = problem.prior(model)
    rng = np.random.default_rng(1)
    for direction in P[:, rng.choice(P.shape[1], 12, replace=False)].T:
        h = 1e-6
        plus = problem.residual(problem.retract(model, h * direction))
        minus = problem.residual(problem.retract(model, -h * direction))
        assert np.allclose((plus - minus) / (2 * h), J @ direction, rtol=1e-6, atol=1e-7)


def test_fixtures_with_a_measured_marker(iiwa, scene):
    """Sockets and plane together with a marker on link 4 measured in the base frame: nothing
    is a gauge any more, and the fixtures come out where the truth has them (1e-9 m)."""
    _, model, Q, _, (c0, c1, normal, offset) = scene
    log = fixture_log(scene)
    data = model.model.createData()
    link4 = model.model.getFrameId(iiwa.link_names[3])
    elbow = []
    for q in Q:
        pin.framesForwardKinematics(model.model, data, q)
        elbow.append(data.oMf[link4].act(np.array([0.05, -0.07, 0.02])))
    markers = (*log.markers, Marker("elbow", iiwa.link_names[3], np.array(elbow)))
    problem = KinematicProblem.from_log(replace(log, markers=markers))
    assert problem.measured and problem.device_known
    fit = calibrate_kinematic(iiwa, problem)
    assert np.abs(problem.residual(fit.model)).max() < 1e-10
    states = fit.model.fixtures
    assert np.abs(states[0, :3] - c0).max() < 1e-9
    assert np.abs(states[1, :3] - c1).max() < 1e-9
    assert np.abs(states[2] - [*normal, offset]).max() < 1e-9
    Q_new = HOME + np.random.default_rng(4).normal(scale=0.6, size=(20, 7))
    assert np.abs(predicted_balls(problem, fit, Q_new) - model.balls(Q_new)).max() < 1e-9


DESCRIPTION = """\
[positions]
file = "log.csv"
unit = "rad"
columns = ["a1", "a2", "a3", "a4", "a5", "a6", "a7"]
[[markers]]
name = "ball"
frame = "{frame}"
[[fixtures]]
name = "socket_0"
type = "point"
marker = "ball"
column = "socket"
value = 0
[[fixtures]]
name = "table"
type = "{second}"
marker = "{marker}"
column = "socket"
value = {value}
[[distances]]
between = ["socket_0", "{other}"]
value = 50
unit = "mm"
"""


def write_description(tmp_path, iiwa, **keys) -> tuple:
    keys = {"frame": iiwa.tool_name, "second": "point", "marker": "ball", "value": 1,
            "other": "table", "last": 1} | keys  # fmt: skip
    q = np.random.default_rng(0).normal(scale=0.3, size=(6, 7))
    rows = np.hstack([[[0], [0], [0], [1], [1], [keys["last"]]], q])
    header = "socket," + ",".join(f"a{i}" for i in range(1, 8))
    np.savetxt(tmp_path / "log.csv", rows, delimiter=",", header=header, comments="")
    path = tmp_path / "log.toml"
    path.write_text(DESCRIPTION.format(**keys))
    return path, q


def test_a_description_with_fixtures_reads_as_described(iiwa, tmp_path):
    path, q = write_description(tmp_path, iiwa)
    log = wb.calibration.read_log(path, iiwa)
    assert [f.name for f in log.fixtures] == ["socket_0", "table"]
    assert log.fixtures[0].rows.tolist() == [True, True, True, False, False, False]
    assert log.fixtures[1].rows.tolist() == [False, False, False, True, True, True]
    assert log.distances[0].between == ("socket_0", "table")
    assert log.distances[0].value == pytest.approx(0.05)
    assert log.markers[0].position is None and log.markers[0].rotation is None
    assert np.array_equal(log.q, q)


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"marker": "pen"}, "is not a [[markers]] name"),
        ({"second": "plane"}, "is not a point fixture"),
        ({"value": 7}, "no row of"),
        ({"other": "socket_0"}, "names one fixture twice"),
        ({"second": "cylinder"}, "must be one of"),
        ({"frame": "nowhere"}, "unknown frame"),
        ({"last": 2}, "line 7 (socket = 2) rests in no fixture"),  # no measured marker
    ],
)
def test_bad_fixtures_are_refused_naming_them(iiwa, tmp_path, keys, message):
    path, _ = write_description(tmp_path, iiwa, **keys)
    with pytest.raises(wb.WorkbenchError, match=re.escape(message)):
        wb.calibration.read_log(path, iiwa)


def test_the_gauge_with_compliance_is_the_rigid_one(iiwa, scene):
    """Compliances estimated with fixtures alone (their entries between the markers' and the
    fixtures'): at the exact rigid fit (c = 0) the Jacobian on the candidate directions
    still sees everything but the six world-placement directions, and the steps the fit
    takes (``P free``) are exactly the ones it sees."""
    problem = KinematicProblem.from_log(fixture_log(scene))
    fit = calibrate_kinematic(iiwa, problem)
    compliant = replace(problem, parameters="compliance")
    model = replace(fit.model, compliance=np.zeros(iiwa.n))
    assert compliant.width(iiwa) == problem.width(iiwa) + iiwa.n
    assert np.abs(compliant.residual(model)).max() < 1e-10
    P, _ = compliant.prior(model)
    _, J = compliant.evaluate(model)
    assert P.shape[0] == J.shape[1] == compliant.step_size(iiwa)
    JP = J @ P
    s = np.linalg.svd(JP / np.linalg.norm(JP, axis=0), compute_uv=False)
    assert int(np.sum(s < 1e-8 * s[0])) == 6
    free = compliant.free(model, P)
    assert P.shape[1] - free.shape[1] == 6
    JPN = JP @ free
    s = np.linalg.svd(JPN, compute_uv=False)
    assert s[-1] > 1e-8 * s[0]


def test_a_plane_whose_samples_span_no_plane_is_told():
    """``plane_span``: the RMS spreads of a plane fixture's points along their two main
    directions, L / sqrt(12) for points spread evenly over a segment of length L; a plane
    touched at one spot, or along a line, leaves its normal (partly) free."""
    from workbench.calibration.fitting.fixtures import PLANE_SPAN, plane_span

    rotation = wb.lie.exp_so3(np.array([0.3, -0.2, 0.5]))
    s = np.linspace(-0.1, 0.1, 2001)
    grid = np.stack(np.meshgrid(s[::40], s[::40]), axis=-1).reshape(-1, 2)
    square = np.column_stack([grid[:, 0], 0.5 * grid[:, 1], np.zeros(len(grid))]) @ rotation.T
    line = np.column_stack([s, np.zeros_like(s), np.zeros_like(s)]) @ rotation.T
    assert plane_span(line + 0.3)[0] == pytest.approx(0.2 / np.sqrt(12), rel=1e-3)
    assert plane_span(line)[1] < 1e-12
    spans = plane_span(square)
    assert spans[1] == pytest.approx(0.5 * spans[0]) and spans[1] > PLANE_SPAN
    assert np.all(plane_span(np.full((5, 3), 0.2)) < 1e-12)
