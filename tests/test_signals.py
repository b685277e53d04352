"""Signal processing for identification (workbench.recordings.signals) against SciPy, NumPy,
closed-form filter responses and direct convolution sums written here."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import signal

import workbench as wb
from workbench.recordings import signals


def sine_fit(t: np.ndarray, x: np.ndarray, frequency: float) -> tuple[float, float]:
    """Amplitude and phase of the best fit a sin(w t + p) to x (least squares)."""
    w = 2 * np.pi * frequency
    basis = np.column_stack([np.sin(w * t), np.cos(w * t)])
    (s, c), *_ = np.linalg.lstsq(basis, x, rcond=None)
    return float(np.hypot(s, c)), float(np.arctan2(c, s))


def scipy_padlen(order: int) -> int:
    """The smallest length sosfiltfilt accepts minus one (found by trying SciPy itself)."""
    sos = signal.butter(order, 0.1, output="sos")
    for length in range(1, 200):
        try:
            signal.sosfiltfilt(sos, np.zeros(length))
        except ValueError:
            continue
        return length - 1
    raise AssertionError("sosfiltfilt refused every length")


def direct_decimation(x: np.ndarray, factor: int) -> np.ndarray:
    """y_i = sum_k h_k x_{i factor + k - half}, x = 0 outside, i < ceil(N / factor)."""
    h = signal.firwin(20 * factor + 1, 0.8 / factor, window="hamming")
    half = 10 * factor
    N = x.shape[0]
    out = np.zeros((-(-N // factor), *x.shape[1:]))
    for i in range(out.shape[0]):
        for k, hk in enumerate(h):
            j = i * factor + k - half
            if 0 <= j < N:
                out[i] += hk * x[j]
    return out


# ------------------------------------------------------------------ low-pass
def test_lowpass_equals_scipy_butterworth_filtfilt():
    """lowpass equals scipy.signal.butter (SOS) + sosfiltfilt applied here, per channel."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, 3)).cumsum(axis=0)
    for order in (1, 2, 4, 5):
        sos = signal.butter(order, 30.0 / (1000.0 / 2), btype="low", output="sos")
        expected = np.column_stack([signal.sosfiltfilt(sos, x[:, k]) for k in range(3)])
        got = signals.lowpass(x, 1000.0, 30.0, order)
        assert np.abs(got - expected).max() < 1e-12 * np.abs(expected).max()


@pytest.mark.parametrize("ratio", [0.1, 0.5, 1.0, 1.5, 3.0])
def test_lowpass_gain_and_phase_of_sines(ratio):
    """A sine's gain is the squared digital Butterworth magnitude
    1 / (1 + (tan(pi f / fs) / tan(pi fc / fs))^(2 order)) (bilinear transform, closed form);
    its phase is unchanged (zero phase): 1 well below the cut-off, 1/2 at it, tiny above."""
    fs, fc, order = 1000.0, 40.0, 4
    f = ratio * fc
    t = np.arange(8000) / fs
    x = np.sin(2 * np.pi * f * t + 0.3)
    y = signals.lowpass(x, fs, fc, order)
    inner = slice(2000, 6000)
    gain, phase = sine_fit(t[inner], y[inner], f)
    expected = 1.0 / (1.0 + (np.tan(np.pi * f / fs) / np.tan(np.pi * fc / fs)) ** (2 * order))
    assert abs(gain - expected) < 1e-6
    if expected > 1e-3:
        assert abs(phase - 0.3) < 1e-6
    if ratio <= 0.1:
        assert np.abs(y[inner] - x[inner]).max() < 1e-6
    if ratio >= 3.0:
        assert np.abs(y[inner]).max() < 1e-3


def test_lowpass_rejects_cutoff_at_or_above_nyquist():
    """A cut-off outside (0, fs/2) is a WorkbenchError naming the signal and the Nyquist limit."""
    x = np.zeros((100, 2))
    for cutoff in (50.0, 80.0, 0.0, -1.0):
        with pytest.raises(wb.WorkbenchError) as info:
            signals.lowpass(x, 100.0, cutoff, what="log.csv: positions")
        message = str(info.value)
        assert "log.csv: positions" in message and "Nyquist" in message, message


@pytest.mark.parametrize("order", [1, 2, 3, 4, 6])
def test_lowpass_too_few_samples_is_a_workbench_error(order):
    """Exactly as many samples as SciPy's sosfiltfilt refuses give a WorkbenchError that names
    the signal and says 'too few'; one more sample is filtered."""
    padlen = scipy_padlen(order)
    with pytest.raises(wb.WorkbenchError, match=r"positions: .*too few"):
        signals.lowpass(np.ones(padlen), 100.0, 10.0, order, what="positions")
    y = signals.lowpass(np.ones(padlen + 1), 100.0, 10.0, order, what="positions")
    assert np.abs(y - 1.0).max() < 1e-9  # unit DC gain


# ------------------------------------------------------------- derivatives
def test_derivatives_have_numpy_gradient_semantics():
    """dq, ddq are second-order central differences inside and first-order one-sided ones at
    the ends (written out here), applied twice; exact inside for a quadratic."""
    dt = 0.01
    t = dt * np.arange(50)
    a, b, c = np.array([3.0, -0.5]), np.array([1.0, 2.0]), np.array([0.2, -0.1])
    q = a * t[:, None] ** 2 + b * t[:, None] + c

    def differences(x):
        d = np.empty_like(x)
        d[1:-1] = (x[2:] - x[:-2]) / (2 * dt)
        d[0] = (x[1] - x[0]) / dt
        d[-1] = (x[-1] - x[-2]) / dt
        return d

    dq, ddq = signals.derivatives(q, dt)
    expected_dq = differences(q)
    np.testing.assert_allclose(dq, expected_dq, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ddq, differences(expected_dq), rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(dq[1:-1], 2 * a * t[1:-1, None] + b, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(ddq[2:-2], np.broadcast_to(2 * a, (46, 2)), rtol=1e-9)


# --------------------------------------------------------------- decimation
def test_fir_is_the_documented_hamming_lowpass():
    """20 factor + 1 symmetric taps of unit DC gain; flat within 0.5 % to 0.6 of the new
    Nyquist frequency and below -52 dB from the new Nyquist frequency on (scipy freqz)."""
    for factor in (2, 3, 10, 25):
        h = signals.fir(factor)
        assert h.shape == (20 * factor + 1,)
        np.testing.assert_allclose(h, h[::-1], atol=0)
        assert abs(h.sum() - 1.0) < 1e-12
        w, H = signal.freqz(h, worN=np.linspace(0.0, np.pi, 8001))
        nyquist = np.pi / factor
        assert np.abs(np.abs(H[w <= 0.6 * nyquist]) - 1).max() < 5e-3
        assert 20 * np.log10(np.abs(H[w >= nyquist]).max()) < -52.0


@pytest.mark.parametrize(("samples", "factor"), [(97, 2), (200, 5), (451, 10), (64, 1)])
def test_decimate_equals_direct_convolution_sum(samples, factor):
    """decimate equals the direct sum over firwin taps with zero padding (written here),
    for 1-D and multi-channel arrays, with ceil(N / factor) outputs."""
    rng = np.random.default_rng(samples)
    x = rng.normal(size=(samples, 2, 3))
    expected = x if factor == 1 else direct_decimation(x, factor)
    got = signals.decimate(x, factor)
    assert got.shape == (-(-samples // factor), 2, 3)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(signals.decimate(x[:, 1, 2], factor), expected[:, 1, 2], atol=1e-12)


@pytest.mark.parametrize("block", [1, 3, 7, 50, 10_000])
def test_decimate_blocks_equals_whole_array(block):
    """Any block size gives decimate of the whole array (1e-12); rows are requested only inside
    [0, samples), each request at most block outputs plus both filter halves long."""
    rng = np.random.default_rng(block)
    samples, factor = 1003, 7
    x = rng.normal(size=(samples, 4))
    requests = []

    def rows(start, stop):
        requests.append((start, stop))
        return x[start:stop]

    got = signals.decimate_blocks(rows, samples, factor, block=block)
    np.testing.assert_allclose(got, direct_decimation(x, factor), rtol=0, atol=1e-12)
    assert all(0 <= a < b <= samples for a, b in requests)
    assert max(b - a for a, b in requests) <= (block - 1) * factor + 20 * factor + 1


def test_decimate_is_linear():
    """decimate(a x + b y) = a decimate(x) + b decimate(y)."""
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(2, 600, 3))
    a, b = 2.5, -0.7
    left = signals.decimate(a * x + b * y, 6)
    right = a * signals.decimate(x, 6) + b * signals.decimate(y, 6)
    np.testing.assert_allclose(left, right, rtol=0, atol=1e-12)


@pytest.mark.parametrize("factor", [2, 5, 10])
def test_decimate_keeps_constants_and_ramps_at_sample_i_factor(factor):
    """Away from the borders a constant stays constant and a ramp x_k = k is mapped to
    y_i = i factor (symmetric taps, unit DC gain): output i sits at input i factor."""
    samples = 73 * factor + 3
    k = np.arange(samples, dtype=float)
    inner = slice(signals.border(factor), -(-samples // factor) - signals.border(factor))
    const = signals.decimate(np.full(samples, 4.2), factor)
    assert np.abs(const[inner] - 4.2).max() < 1e-12
    ramp = signals.decimate(k, factor)
    i = np.arange(ramp.shape[0])
    assert np.abs(ramp[inner] - factor * i[inner]).max() < 1e-9
    # at the first output, the filter sees the zero padding
    assert abs(const[0] - 4.2) > 0.1


def test_decimate_keeps_low_frequencies_and_suppresses_aliases():
    """A sine at 0.3 of the new Nyquist frequency keeps gain and phase (within 0.5 %) at the
    kept samples; one at 1.3 of it (which would alias) is attenuated below 3e-3."""
    fs, factor = 1000.0, 10
    nyquist = fs / factor / 2
    t = np.arange(20_000) / fs
    b = signals.border(factor)
    for ratio, bound in ((0.3, None), (1.3, 3e-3)):
        x = np.sin(2 * np.pi * ratio * nyquist * t + 0.4)
        y = signals.decimate(x, factor)[b:-b]
        kept = x[::factor][b:-b]
        if bound is None:
            assert np.abs(y - kept).max() < 5e-3
        else:
            assert np.abs(y).max() < bound


def test_decimate_rejects_non_positive_factor():
    """A factor below 1 is a WorkbenchError naming the factor."""
    with pytest.raises(wb.WorkbenchError, match="decimation factor 0"):
        signals.decimate(np.zeros(10), 0)


# ------------------------------------------------------------------ borders
@pytest.mark.parametrize("factor", [1, 2, 5, 10, 40])
@pytest.mark.parametrize("order", [1, 2, 4, 6])
def test_border_covers_both_filters(factor, order):
    """The border (decimated samples) spans the FIR half length (10 outputs) when decimating
    and SciPy's filtfilt padding (in output samples), and no more."""
    padding = scipy_padlen(order)
    needed = max(10 if factor > 1 else 0, -(-padding // factor))
    assert signals.border(factor, order) == needed


@pytest.mark.parametrize("factor", [1, 2, 5, 10])
@pytest.mark.parametrize("order", [2, 4])
def test_minimum_samples_suffice(factor, order):
    """With minimum_samples raw samples the low-pass accepts the signal and at least ten
    decimated samples remain between the borders; for factor 1 one sample fewer fails."""
    m = signals.minimum_samples(factor, order)
    x = np.sin(np.linspace(0.0, 3.0, m))
    signals.lowpass(x, 1000.0, 50.0, order)
    b = signals.border(factor, order)
    assert signals.decimate(x, factor).shape[0] - 2 * b >= 10
    if factor == 1:
        assert (m - 1) - 2 * b < 10 or m - 1 <= scipy_padlen(order)


@pytest.mark.parametrize("factor", [2, 10])
def test_minimum_samples_is_the_fewest(factor):
    """Docstring: 'Fewest raw samples that the low-pass, the decimation and the borders
    accept': one sample fewer must leave fewer than ten decimated samples (or fail)."""
    m = signals.minimum_samples(factor)
    outputs = -(-(m - 1) // factor)
    assert outputs - 2 * signals.border(factor) < 10 or m - 1 <= scipy_padlen(4)
