"""Typed views of what the crawler delivers: torrents, completions, retries, observations,
and the events of the polling API."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, Optional, Tuple, Union

from . import _native


class Answer(enum.IntEnum):
    """The three answers to a torrent (a torrent callback with ``ack=True`` returns one, or
    a bool; :meth:`Crawler.answer` takes one).

    ``ACCEPT``: every sink holds it, the hash is done. ``REJECT``: not wanted, the hash is
    done. ``RETRY``: wanted but it could not be stored now (a sink failed): the round
    completes ``sink_failed`` and the hash is fetched again (on the retry store's short
    schedule, or at its next announce without a store)."""

    REJECT = _native.ANSWER_REJECT
    ACCEPT = _native.ANSWER_ACCEPT
    RETRY = _native.ANSWER_RETRY

    @classmethod
    def of(cls, result: Any) -> "Answer":
        """A callback's return as an answer: an Answer (or its int value) as is, else truthy
        accepts and falsy (False, None) rejects."""
        if isinstance(result, Answer):
            return result
        if type(result) is int and result in (cls.REJECT, cls.ACCEPT, cls.RETRY):
            return cls(result)
        return cls.ACCEPT if result else cls.REJECT


@dataclass(frozen=True)
class TorrentFile:
    path: str
    size: int


@dataclass(frozen=True)
class Torrent:
    """A verified torrent: the torrent JSON form (docs/torrent-json.md) as a dataclass.

    ``json`` is the library's own JSON text (with ``peer`` and ``discovered_at``), the form
    the CLI writes to its JSON-lines output; ``info`` the raw info dict as received;
    ``extra`` holds fields this version of the package does not know (the form only gains
    fields).
    """

    info_hash: str
    info_hash_v1: Optional[str]
    info_hash_v2: Optional[str]
    version: str
    name: str
    total_size: int
    num_files: int
    piece_length: int
    private: bool
    files: Tuple[TorrentFile, ...]
    peer: Optional[str] = None
    discovered_at: Optional[datetime] = None
    #: The stream that served it: "plaintext" or "rc4" (MSE), and "tcp" or "utp".
    encryption: Optional[str] = None
    transport: Optional[str] = None
    schema: int = 1
    info: bytes = field(default=b"", repr=False, compare=False)
    json: str = field(default="", repr=False, compare=False)
    extra: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    _KNOWN = frozenset(("schema", "info_hash", "info_hash_v1", "info_hash_v2", "version", "name",
                        "total_size", "num_files", "piece_length", "private", "files", "peer",
                        "discovered_at", "encryption", "transport"))

    @classmethod
    def from_json(cls, text: str, info: bytes = b"") -> "Torrent":
        return cls.from_doc(json.loads(text), text, info)

    @classmethod
    def from_doc(cls, doc: Dict[str, Any], text: str = "", info: bytes = b"") -> "Torrent":
        return cls(
            info_hash=doc["info_hash"],
            info_hash_v1=doc.get("info_hash_v1"),
            info_hash_v2=doc.get("info_hash_v2"),
            version=doc["version"],
            name=doc["name"],
            total_size=int(doc["total_size"]),
            num_files=int(doc["num_files"]),
            piece_length=int(doc["piece_length"]),
            private=bool(doc["private"]),
            files=tuple(TorrentFile(f["path"], int(f["size"])) for f in doc["files"]),
            peer=doc.get("peer"),
            discovered_at=_parse_time(doc.get("discovered_at")),
            encryption=doc.get("encryption"),
            transport=doc.get("transport"),
            schema=int(doc.get("schema", 1)),
            info=info,
            json=text,
            extra={k: v for k, v in doc.items() if k not in cls._KNOWN},
        )

    @property
    def hashes(self) -> Tuple[str, ...]:
        """Every hash that names this torrent: the v1 hash and the full v2 hash, when present."""
        return tuple(h for h in (self.info_hash_v1, self.info_hash_v2) if h)

    def to_dict(self) -> Dict[str, Any]:
        """The JSON form as a dict (the library's text when there is one)."""
        if self.json:
            return json.loads(self.json)
        doc: Dict[str, Any] = {
            "schema": self.schema, "info_hash": self.info_hash, "info_hash_v1": self.info_hash_v1,
            "info_hash_v2": self.info_hash_v2, "version": self.version, "name": self.name,
            "total_size": self.total_size, "num_files": self.num_files,
            "piece_length": self.piece_length, "private": self.private,
            "files": [{"path": f.path, "size": f.size} for f in self.files],
        }
        if self.peer is not None:
            doc["peer"] = self.peer
        if self.discovered_at is not None:
            doc["discovered_at"] = self.discovered_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        if self.encryption is not None:
            doc["encryption"] = self.encryption
        if self.transport is not None:
            doc["transport"] = self.transport
        doc.update(self.extra)
        return doc


#: The failure classes of completions and retry events (docs/events.md), in the library's
#: order; encryption_failed (the MSE exchange failed) and utp_timeout (the peer went silent
#: on uTP) came with MSE and uTP. A later library may add more.
FAILURE_CLASSES = ("connect_refused", "connect_timeout", "handshake_failed", "no_extension_support",
                   "no_metadata_support", "rejected", "timeout", "size_limit", "hash_mismatch",
                   "parse_error", "no_peers", "protocol_error", "disconnected", "sink_failed",
                   "cancelled", "encryption_failed", "utp_timeout")


@dataclass(frozen=True)
class Completion:
    """One per gated round: ``outcome`` is accepted, fetch_failed, delivery_rejected,
    sink_failed (answered :attr:`Answer.RETRY`: fetched again later) or cancelled; outcomes
    a later library adds come through as they are. ``failure`` (fetch_failed only) is one of
    :data:`FAILURE_CLASSES` or a class a later library adds. ``round``: with a retry store,
    the failed rounds before this one. ``encryption`` ("plaintext" or "rc4") and
    ``transport`` ("tcp" or "utp"): the stream that served the metadata, with ``peer``."""

    info_hash: str
    outcome: str
    failure: Optional[str]
    attempts: int
    peer: Optional[str]
    round: int = 0
    encryption: Optional[str] = None
    transport: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    _KNOWN = frozenset(("type", "schema", "info_hash", "outcome", "failure", "attempts", "peer", "round",
                        "encryption", "transport"))

    @classmethod
    def from_json(cls, text: str) -> "Completion":
        """Never raises on a completion the library sends (unknown fields go to ``extra``)."""
        return cls.from_doc(_loads(text))

    @classmethod
    def from_doc(cls, doc: Dict[str, Any]) -> "Completion":
        return cls(str(doc.get("info_hash", "")), str(doc.get("outcome", "")), doc.get("failure"),
                   _int(doc.get("attempts")), doc.get("peer"), _int(doc.get("round")),
                   doc.get("encryption"), doc.get("transport"),
                   {k: v for k, v in doc.items() if k not in cls._KNOWN})


@dataclass(frozen=True)
class Retry:
    """What the retry store made of a round, after it committed it (only with a retry store):
    ``state`` ``dormant`` (the round failed: ``failure`` names the class, the hash is due
    again at ``next_retry_at``) or ``done`` (never fetched again). ``attempts``: failed
    rounds so far."""

    info_hash: str
    state: str
    attempts: int
    failure: Optional[str]
    next_retry_at: Optional[datetime]
    extra: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    _KNOWN = frozenset(("type", "schema", "info_hash", "state", "attempts", "failure", "next_retry_at"))

    @classmethod
    def from_json(cls, text: str) -> "Retry":
        return cls.from_doc(_loads(text))

    @classmethod
    def from_doc(cls, doc: Dict[str, Any]) -> "Retry":
        at = doc.get("next_retry_at")
        return cls(str(doc.get("info_hash", "")), str(doc.get("state", "")), _int(doc.get("attempts")),
                   doc.get("failure"),
                   datetime.fromtimestamp(at, timezone.utc) if isinstance(at, (int, float)) else None,
                   {k: v for k, v in doc.items() if k not in cls._KNOWN})


def _unix_time(value: Any) -> Optional[datetime]:
    """Unix seconds as an aware UTC datetime; None when absent or not an integer."""
    return datetime.fromtimestamp(value, timezone.utc) if type(value) is int else None


@dataclass(frozen=True)
class Observation:
    """A hash the DHT side saw: ``kind`` is get_peers (someone looked it up), bep51_sample (a
    node sampled it) or announce (a node announced a peer for it; at most
    ``announce_observations_per_sec``). ``source`` is that node, "ip:port"; ``port`` the port
    an announce named (the peer is the source's IP at it), None for other kinds; ``at`` when
    the crawler saw it."""

    info_hash: str
    source: str
    kind: str
    port: Optional[int] = None
    at: Optional[datetime] = None

    @classmethod
    def from_json(cls, text: str) -> "Observation":
        return cls.from_doc(_loads(text))

    @classmethod
    def from_doc(cls, doc: Dict[str, Any]) -> "Observation":
        port = doc.get("port")
        return cls(str(doc.get("info_hash", "")), doc.get("source", ""), doc.get("kind", ""),
                   port if type(port) is int else None, _unix_time(doc.get("at")))


@dataclass(frozen=True)
class Scrape:
    """The answer to :meth:`Crawler.request_scrape` (BEP-33): the swarm's ``seeders`` and
    ``leechers`` estimated from the bloom filters of the nodes closest to the hash, of which
    ``responders`` described the swarm (0: nobody knew it, the estimates mean unknown) out of
    ``queried``; ``timed_out``: ``crawl.scrape.timeout_secs`` ended it (it had no node to ask,
    or its answers did not all come); ``at`` is when the scrape ended."""

    info_hash: str
    seeders: int
    leechers: int
    responders: int
    queried: int
    at: Optional[datetime]
    timed_out: bool = False

    @classmethod
    def from_json(cls, text: str) -> "Scrape":
        return cls.from_doc(_loads(text))

    @classmethod
    def from_doc(cls, doc: Dict[str, Any]) -> "Scrape":
        return cls(str(doc.get("info_hash", "")), _int(doc.get("seeders")), _int(doc.get("leechers")),
                   _int(doc.get("responders")), _int(doc.get("queried")), _unix_time(doc.get("at")),
                   doc.get("timed_out") is True)


# ---- polled events (Crawler.poll) ----------------------------------------------------------

@dataclass(frozen=True)
class GateRequest:
    """A polled gate: answer ``crawler.answer(id, True)`` to fetch the hash, False to skip it
    (unanswered: ``metadata.gate_default`` after ``metadata.gate_timeout_millis``)."""

    id: int
    info_hash: str


@dataclass(frozen=True)
class TorrentRequest:
    """A polled torrent: answer ``crawler.answer(id, Answer.ACCEPT | REJECT | RETRY)``
    (unanswered: RETRY after ``metadata.gate_timeout_millis``)."""

    id: int
    torrent: Torrent


@dataclass(frozen=True)
class Error:
    """A runtime error of the library (polled)."""

    message: str


Event = Union[GateRequest, TorrentRequest, Completion, Retry, Observation, Scrape, Error]


def decode_event(text: str, info: Optional[bytes] = None) -> Optional[Event]:
    """A polled event envelope as its typed event; None for a type this package does not know
    (the library may add types) or a document that is not an event."""
    doc = _loads(text)
    kind = doc.get("type")
    if kind == "completion":
        return Completion.from_doc(doc)
    if kind == "retry":
        return Retry.from_doc(doc)
    if kind == "observation":
        return Observation.from_doc(doc)
    if kind == "scrape":
        return Scrape.from_doc(doc)
    if kind == "error":
        return Error(str(doc.get("message", "")))
    if kind == "gate" and "id" in doc:
        return GateRequest(int(doc["id"]), str(doc.get("info_hash", "")))
    if kind == "torrent" and "id" in doc and isinstance(doc.get("torrent"), dict):
        inner = doc["torrent"]
        return TorrentRequest(int(doc["id"]),
                              Torrent.from_doc(inner, json.dumps(inner, separators=(",", ":"), ensure_ascii=False),
                                               info or b""))
    return None


def _loads(text: str) -> Dict[str, Any]:
    try:
        doc = json.loads(text)
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _parse_time(text: Optional[str]) -> Optional[datetime]:
    if not text:
        return None
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
