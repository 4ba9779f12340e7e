"""Builds lib/tinylogreg into a wheel: python3 lib/build_wheel.py OUT_DIR.

A wheel is a zip of the package with its METADATA, WHEEL and a RECORD of every file's
sha256 (PEP 427), so the standard library builds one: no setuptools, no network. Fixed
times and order, so the same source gives the same bytes.
"""
import base64
import hashlib
import os
import sys
import zipfile

NAME, VERSION = "tinylogreg", "0.1.0"
HERE = os.path.dirname(os.path.abspath(__file__))


def main(out_dir):
    info = f"{NAME}-{VERSION}.dist-info"
    files = {}
    package = os.path.join(HERE, NAME)
    for name in sorted(os.listdir(package)):
        if name.endswith(".py"):
            with open(os.path.join(package, name), "rb") as f:
                files[f"{NAME}/{name}"] = f.read()
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\nSummary: Logistic regression in plain Python (the Sterna example's requirement)\n".encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: sterna-example\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    os.makedirs(out_dir, exist_ok=True)
    wheel = os.path.join(out_dir, f"{NAME}-{VERSION}-py3-none-any.whl")
    with zipfile.ZipFile(wheel + ".tmp", "w", zipfile.ZIP_DEFLATED) as whl:
        for path, data in files.items():
            entry = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
            entry.external_attr = 0o644 << 16
            whl.writestr(entry, data, zipfile.ZIP_DEFLATED)
    os.replace(wheel + ".tmp", wheel)
    print(f"built {wheel}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 lib/build_wheel.py OUT_DIR")
    main(sys.argv[1])
