"""The in-tree PEP 517 backend (python/_backend/pnmem_backend.py): a wheel whose RECORD hashes match,
an sdist, an editable wheel; and the library lookup's error, which names every place it tried."""
import base64
import hashlib
import importlib
import os
import subprocess
import sys
import tarfile
import zipfile

import pytest
from conftest import SOURCE_ROOT, child_env


@pytest.fixture(scope="module")
def backend():
    sys.path.insert(0, str(SOURCE_ROOT / "python" / "_backend"))
    try:
        yield importlib.import_module("pnmem_backend")
    finally:
        sys.path.remove(str(SOURCE_ROOT / "python" / "_backend"))


def test_requires_nothing(backend):
    assert backend.get_requires_for_build_wheel() == []
    assert backend.get_requires_for_build_sdist() == []
    assert backend.get_requires_for_build_editable() == []


def test_wheel(backend, tmp_path):
    name = backend.build_wheel(str(tmp_path))
    assert name == "pnmem-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(tmp_path / name) as z:
        names = z.namelist()
        assert "pnmem/__init__.py" in names and "pnmem/_ffi.py" in names and "pnmem/py.typed" in names
        assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
        meta = z.read("pnmem-0.1.0.dist-info/METADATA").decode()
        assert "Name: pnmem\n" in meta and "Version: 0.1.0\n" in meta
        assert "Root-Is-Purelib: true" in z.read("pnmem-0.1.0.dist-info/WHEEL").decode()
        record = z.read("pnmem-0.1.0.dist-info/RECORD").decode().splitlines()
        listed = {}
        for line in record:
            path, digest, size = line.rsplit(",", 2)
            listed[path] = (digest, size)
        assert set(listed) == set(names)
        for path, (digest, size) in listed.items():
            if path.endswith("RECORD"):
                assert digest == "" and size == ""
                continue
            data = z.read(path)
            want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == want and int(size) == len(data), path


def test_sdist_and_editable(backend, tmp_path):
    sdist = backend.build_sdist(str(tmp_path))
    with tarfile.open(tmp_path / sdist) as t:
        names = t.getnames()
    assert "pnmem-0.1.0/pyproject.toml" in names and "pnmem-0.1.0/pnmem/_core.py" in names
    assert "pnmem-0.1.0/_backend/pnmem_backend.py" in names and "pnmem-0.1.0/PKG-INFO" in names
    editable = backend.build_editable(str(tmp_path / "e"))
    with zipfile.ZipFile(tmp_path / "e" / editable) as z:
        pth = [n for n in z.namelist() if n.endswith(".pth")]
        assert pth and z.read(pth[0]).decode().strip() == str(SOURCE_ROOT / "python")


def run_import(env: dict, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import pnmem"], capture_output=True, text=True, timeout=60,
                          env=env, cwd=cwd)


def test_pnmem_library_that_does_not_load_is_named(tmp_path):
    bad = tmp_path / "libpnmem_c.so"
    bad.write_text("not a library")
    for path in (str(bad), str(tmp_path / "missing.so")):
        r = run_import(child_env(PNMEM_LIBRARY=path), tmp_path)
        assert r.returncode != 0
        assert "LibraryNotFound" in r.stderr and "$PNMEM_LIBRARY" in r.stderr and path in r.stderr


def test_pnmem_library_may_name_the_directory(tmp_path):
    # A build's integration/ (or an install's lib/) as $PNMEM_LIBRARY loads the libpnmem_c.so in it, as the
    # file itself does (it was "Is a directory", with nothing else tried).
    lib = os.environ["PNMEM_LIBRARY"]
    for given in (lib, os.path.dirname(lib), os.path.dirname(lib) + "/"):
        r = subprocess.run([sys.executable, "-c", "import pnmem, os; print(os.path.realpath(pnmem.library_path))"],
                           capture_output=True, text=True, timeout=60, env=child_env(PNMEM_LIBRARY=given), cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == os.path.realpath(lib)
    # A directory without the library: named, as a missing file is.
    r = run_import(child_env(PNMEM_LIBRARY=str(tmp_path)), tmp_path)
    assert r.returncode != 0 and "$PNMEM_LIBRARY" in r.stderr and str(tmp_path / "libpnmem_c.so") in r.stderr


def test_nothing_found_names_every_place(tmp_path):
    # The package copied outside any checkout, no pkg-config path, no PNMEM_LIBRARY.
    import shutil
    shutil.copytree(SOURCE_ROOT / "python" / "pnmem", tmp_path / "pnmem",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = child_env(PYTHONPATH=str(tmp_path), PKG_CONFIG_PATH=str(tmp_path), PKG_CONFIG_LIBDIR=str(tmp_path))
    env.pop("PNMEM_LIBRARY", None)
    env.pop("LD_LIBRARY_PATH", None)
    r = run_import(env, tmp_path)
    if r.returncode == 0:
        pytest.skip("a libpnmem_c.so is installed system-wide: the loader found it")
    for place in ("$PNMEM_LIBRARY: not set", "pkg-config --variable=libdir pnmem-c",
                  "pkg-config --variable=libdir pnmem", "build tree", "the loader's search"):
        assert place in r.stderr, r.stderr
    assert "ImportError" in r.stderr or "LibraryNotFound" in r.stderr


def test_found_in_the_build_tree_without_pnmem_library(tmp_path):
    lib = os.environ.get("PNMEM_LIBRARY")
    if not lib or os.path.dirname(os.path.dirname(os.path.dirname(lib))) != str(SOURCE_ROOT):
        pytest.skip("PNMEM_LIBRARY is not a build tree of this checkout")
    env = child_env(PKG_CONFIG_PATH=str(tmp_path), PKG_CONFIG_LIBDIR=str(tmp_path))
    env.pop("PNMEM_LIBRARY")
    r = subprocess.run([sys.executable, "-c", "import pnmem; print(pnmem.library_path)"], capture_output=True,
                       text=True, timeout=60, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "/integration/libpnmem_c.so" in r.stdout and r.stdout.startswith(str(SOURCE_ROOT) + "/build")
