"""A PEP 517 build backend for the pnmem Python package, standard library only.

`pip install ./python` (offline: pyproject.toml requires nothing, so build isolation installs
nothing) calls build_wheel; `pip install -e ./python` calls build_editable. The wheel is a zip of
the pnmem/ package with its .dist-info (METADATA, WHEEL, RECORD with sha256 hashes), pure Python
(py3-none-any): libpnmem_c is found at import time, not built here."""
from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
PACKAGE = "pnmem"


def _project() -> dict:
    path = os.path.join(HERE, "pyproject.toml")
    try:
        import tomllib  # Python 3.11+
        with open(path, "rb") as f:
            return tomllib.load(f)["project"]
    except ImportError:
        pass
    # Older interpreters: the flat `key = "value"` lines of [project] are all this backend reads.
    project: dict = {}
    section = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"\s*\[(.+)\]\s*$", line)
            if m:
                section = m.group(1)
                continue
            m = re.match(r'\s*([\w-]+)\s*=\s*"(.*)"\s*$', line)
            if section == "project" and m:
                project[m.group(1)] = m.group(2)
    return project


def _name_version() -> tuple[str, str]:
    p = _project()
    return p["name"], p["version"]


def _metadata() -> str:
    p = _project()
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}"]
    if p.get("description"):
        lines.append(f"Summary: {p['description']}")
    if p.get("requires-python"):
        lines.append(f"Requires-Python: {p['requires-python']}")
    lic = p.get("license")
    if isinstance(lic, dict) and lic.get("text"):
        lines.append(f"License: {lic['text']}")
    readme = os.path.join(HERE, "README.md")
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = f.read()
        return "\n".join(lines) + "\n\n" + body
    return "\n".join(lines) + "\n"


def _package_files() -> list[tuple[str, str]]:
    """(path in the archive, path on disk) of every file of the package, sorted."""
    out = []
    root = os.path.join(HERE, PACKAGE)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            if fn.endswith((".pyc", ".pyo")):
                continue
            disk = os.path.join(dirpath, fn)
            out.append((os.path.relpath(disk, HERE).replace(os.sep, "/"), disk))
    return out


def _date() -> tuple:
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))  # 1980-01-01: zip's earliest
    return time.gmtime(max(epoch, 315532800))[:6]


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _write_wheel(wheel_directory: str, extra: list[tuple[str, bytes]]) -> str:
    name, version = _name_version()
    dist_info = f"{name}-{version}.dist-info"
    wheel_name = f"{name}-{version}-py3-none-any.whl"
    entries: list[tuple[str, bytes]] = list(extra)
    entries.append((f"{dist_info}/METADATA", _metadata().encode("utf-8")))
    entries.append((f"{dist_info}/WHEEL", (
        "Wheel-Version: 1.0\nGenerator: pnmem_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n").encode()))
    entries.append((f"{dist_info}/top_level.txt", f"{PACKAGE}\n".encode()))
    record = io.StringIO()
    for arcname, data in entries:
        record.write(f"{arcname},{_record_hash(data)},{len(data)}\n")
    record.write(f"{dist_info}/RECORD,,\n")
    entries.append((f"{dist_info}/RECORD", record.getvalue().encode()))
    os.makedirs(wheel_directory, exist_ok=True)
    path = os.path.join(wheel_directory, wheel_name)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for arcname, data in entries:
            info = zipfile.ZipInfo(arcname, date_time=_date())
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return wheel_name


# --- PEP 517 hooks -------------------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None) -> list:
    return []


def get_requires_for_build_sdist(config_settings=None) -> list:
    return []


def get_requires_for_build_editable(config_settings=None) -> list:
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None) -> str:
    files = []
    for arcname, disk in _package_files():
        with open(disk, "rb") as f:
            files.append((arcname, f.read()))
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None) -> str:
    """A wheel whose .pth puts this source directory on sys.path: edits take effect without reinstalling."""
    return _write_wheel(wheel_directory, [(f"_{PACKAGE}_editable.pth", (HERE + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None) -> str:
    name, version = _name_version()
    base = f"{name}-{version}"
    members: list[tuple[str, bytes]] = []
    for rel in ("pyproject.toml", "README.md", "_backend/pnmem_backend.py"):
        disk = os.path.join(HERE, rel)
        if os.path.exists(disk):
            with open(disk, "rb") as f:
                members.append((rel, f.read()))
    for arcname, disk in _package_files():
        with open(disk, "rb") as f:
            members.append((arcname, f.read()))
    members.append(("PKG-INFO", _metadata().encode("utf-8")))
    os.makedirs(sdist_directory, exist_ok=True)
    filename = f"{base}.tar.gz"
    mtime = time.mktime(time.struct_time(_date() + (0, 0, -1)))
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for rel, data in members:
            info = tarfile.TarInfo(f"{base}/{rel}")
            info.size = len(data)
            info.mode = 0o644
            info.mtime = int(mtime)
            tar.addfile(info, io.BytesIO(data))
    return filename
