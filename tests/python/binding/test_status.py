"""Every status of the C ABI's dhtc_status enum is known to the binding: the extension
exports its value and the package maps its name to an exception. Parses the header, so a
status added to capi/include/dhtcrawler.h fails here until the binding has it."""

from __future__ import annotations

import re

import dhtcrawler
from dhtcrawler import _errors, _native

from conftest import ROOT

HEADER = ROOT / "capi" / "include" / "dhtcrawler.h"


def header_enum(name: str) -> dict:
    text = HEADER.read_text()
    m = re.search(r"typedef\s+enum\s+" + name + r"\s*\{(.*?)\}\s*" + name + r"\s*;", text, re.S)
    assert m, f"no typedef enum {name} in {HEADER}"
    body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    body = re.sub(r"//[^\n]*", "", body)
    out = {}
    for entry in body.split(","):
        entry = entry.strip()
        if not entry:
            continue
        key, _, value = entry.partition("=")
        out[key.strip()] = int(value.strip(), 0)
    return out


def test_header_statuses_are_all_in_the_binding():
    statuses = header_enum("dhtc_status")
    assert "DHTC_ERR_STORE" in statuses and statuses["DHTC_OK"] == 0
    missing = sorted(set(statuses) - set(_errors.STATUS_ERRORS))
    assert not missing, f"statuses in dhtcrawler.h that python/dhtcrawler/_errors.py does not map: {missing}"
    unknown = sorted(set(_errors.STATUS_ERRORS) - set(statuses))
    assert not unknown, f"_errors.STATUS_ERRORS names statuses the header does not have: {unknown}"
    for name, value in statuses.items():
        attr = name[len("DHTC_"):]
        assert getattr(_native, attr, None) == value, f"_native.{attr} is not {value} ({name})"
        assert _native.status_name(value) == name


def test_every_error_status_raises_a_typed_exception():
    for name, value in header_enum("dhtc_status").items():
        error = _errors.STATUS_ERRORS[name]
        if value == 0:
            assert error is None
            continue
        e = _errors.from_native(_native.NativeError(value, name, "message"))
        assert isinstance(e, error) and isinstance(e, dhtcrawler.DhtcError)
        assert (e.status, e.status_name, e.message) == (value, name, "message")
    e = _errors.from_native(_native.NativeError(-10, "DHTC_ERR_STORE", "m"))
    assert isinstance(e, dhtcrawler.StoreError)


def test_header_answers_are_the_answer_enum():
    answers = header_enum("dhtc_answer")
    assert {f"DHTC_ANSWER_{a.name}": int(a) for a in dhtcrawler.Answer} == answers


def test_version_macros_match_the_library():
    m = re.search(r'#define\s+DHTC_VERSION_STRING\s+"([^"]+)"', HEADER.read_text())
    assert m and _native.VERSION_STRING == m.group(1) == dhtcrawler.__version__
