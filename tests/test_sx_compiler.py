"""SX functions compiled to C: the same values as CasADi's virtual machine, cached on disk."""

from __future__ import annotations

import casadi as ca
import numpy as np

from workbench.ocp.sx_compiler import compile_soon, compiled, wait


def _function() -> ca.Function:
    x = ca.SX.sym("x", 3)
    lam = ca.SX.sym("lam", 2)
    y = ca.vertcat(ca.sin(x[0]) * x[1] ** 2, ca.exp(x[2]) * x[0])
    return ca.Function("tiny", [x, lam], [y, ca.hessian(ca.dot(lam, y), x)[0]])


def test_compiled_function_matches_the_virtual_machine_and_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    function = _function()
    fast = compiled(function)
    libraries = list(tmp_path.glob("tiny-*.so"))
    assert len(libraries) == 1
    assert fast.class_name() == "External"
    rng = np.random.default_rng(0)
    X, lam = rng.normal(size=(3, 7)), rng.normal(size=(2, 7))
    for a, b in zip(fast.map(7)(X, lam), function.map(7)(X, lam), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-14, atol=1e-14)
    mtime = libraries[0].stat().st_mtime_ns
    compiled(function)  # loaded, not compiled again
    assert libraries[0].stat().st_mtime_ns == mtime
    assert list(tmp_path.glob("tiny-*.so")) == libraries


def test_without_a_compiler_the_function_itself_is_used(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    function = _function()
    assert compiled(function) is function
    assert not list(tmp_path.iterdir())


def test_compile_soon_compiles_in_the_background_until_waited_for(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    function = _function()
    compilation = compile_soon(function)
    wait()
    assert compilation.done()
    fast = compilation.result()
    assert fast.class_name() == "External"
    assert len(list(tmp_path.glob("tiny-*.so"))) == 1
    X, lam = np.linspace(-1.0, 1.0, 3), np.array([0.5, -2.0])
    for a, b in zip(fast(X, lam), function(X, lam), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-14, atol=1e-14)
    cached = compile_soon(function)  # in the cache: loaded at once
    assert cached.done() and cached.result().class_name() == "External"
    other = ca.Function("tiny", [ca.SX.sym("x", 3), ca.SX.sym("lam", 2)], [ca.SX(1.0), ca.SX(2.0)])
    compile_soon(other).result()  # another expression under the same name: its own library
    assert len(list(tmp_path.glob("tiny-*.so"))) == 2


def test_a_failing_compiler_is_not_tried_again_on_the_same_code(tmp_path, monkeypatch):
    """A compiler that fails leaves the function itself, no library and a marker, so the
    next run neither compiles nor says so; another compiler still compiles."""
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    monkeypatch.setenv("CC", "false")  # found on the PATH, fails on every input
    function = _function()
    compilation = compile_soon(function)
    wait()
    assert compilation.result() is function
    markers = list(tmp_path.glob("tiny-*.failed"))
    assert len(markers) == 1 and sorted(tmp_path.iterdir()) == markers
    again = compile_soon(function)
    assert again.done() and again.result() is function  # no compiler run: nothing pending
    monkeypatch.setenv("CC", "cc")
    assert compiled(function).class_name() == "External"
    assert len(list(tmp_path.glob("tiny-*.so"))) == 1
