"""Typed views of what the crawler delivers: torrents, completions, observations."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, Optional, Tuple


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
    schema: int = 1
    info: bytes = field(default=b"", repr=False, compare=False)
    json: str = field(default="", repr=False, compare=False)
    extra: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    _KNOWN = frozenset(("schema", "info_hash", "info_hash_v1", "info_hash_v2", "version", "name",
                        "total_size", "num_files", "piece_length", "private", "files", "peer",
                        "discovered_at"))

    @classmethod
    def from_json(cls, text: str, info: bytes = b"") -> "Torrent":
        doc = json.loads(text)
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
        doc.update(self.extra)
        return doc


@dataclass(frozen=True)
class Completion:
    """One per gated round: ``outcome`` is accepted, fetch_failed, delivery_rejected or cancelled."""

    info_hash: str
    outcome: str
    failure: Optional[str]
    attempts: int
    peer: Optional[str]

    @classmethod
    def from_json(cls, text: str) -> "Completion":
        doc = json.loads(text)
        return cls(doc["info_hash"], doc["outcome"], doc.get("failure"), int(doc.get("attempts", 0)),
                   doc.get("peer"))


@dataclass(frozen=True)
class Observation:
    """A hash seen without a peer: ``kind`` is get_peers or bep51_sample."""

    info_hash: str
    source: str
    kind: str

    @classmethod
    def from_json(cls, text: str) -> "Observation":
        doc = json.loads(text)
        return cls(doc["info_hash"], doc.get("source", ""), doc.get("kind", ""))


def _parse_time(text: Optional[str]) -> Optional[datetime]:
    if not text:
        return None
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
