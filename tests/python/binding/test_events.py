"""The typed events of the Python API: the three answers (Answer), Retry events through
their own callback and through polling, completions that never fail to decode (sink_failed
included), announces as observations, scrapes that end when nobody answers, and the polling
API (poll, answer, unknown types skipped with a log line).

Torrents come from the BEP-9 peer of conftest.py, announced over KRPC on 127.0.0.1."""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime, timezone

import pytest

import dhtcrawler
from dhtcrawler import Answer, Completion, Observation, Retry, Scrape

from conftest import loopback_options, port_of, wait_for


def sqlite_store(tmp_path) -> dict:
    return {"store": {"kind": "sqlite", "path": str(tmp_path / "retry.sqlite")}}


# ---- decoding, no crawler ------------------------------------------------------------------

def test_answer_of_bools_none_and_answers():
    assert Answer.of(True) is Answer.ACCEPT
    assert Answer.of(False) is Answer.REJECT
    assert Answer.of(None) is Answer.REJECT
    assert Answer.of(Answer.RETRY) is Answer.RETRY
    assert Answer.of(Answer.REJECT) is Answer.REJECT  # an IntEnum of 0, not "falsy: reject" by luck
    assert Answer.of(2) is Answer.RETRY and Answer.of("yes") is Answer.ACCEPT
    assert dhtcrawler.Answer is Answer and int(Answer.ACCEPT) == 1


@pytest.mark.parametrize("text", [
    '{"type":"completion","schema":1,"info_hash":"' + "ab" * 20 + '","outcome":"sink_failed","failure":null,'
    '"attempts":1,"peer":"127.0.0.1:1","round":0}',
    '{"type":"completion","schema":1,"info_hash":"' + "ab" * 20 + '","outcome":"a_future_outcome","new":[1]}',
    '{"type":"completion","schema":1,"outcome":"cancelled","attempts":null}',
    '{"type":"completion"}',
    '{}',
    '[]',
    'not json',
])
def test_completion_from_json_never_raises(text):
    c = Completion.from_json(text)
    assert isinstance(c, Completion)


def test_completion_keeps_outcome_round_and_unknown_fields():
    c = Completion.from_json('{"type":"completion","schema":1,"info_hash":"' + "cd" * 20 + '","outcome":"sink_failed",'
                             '"failure":null,"attempts":2,"peer":null,"round":3,"later":true}')
    assert (c.outcome, c.attempts, c.round, c.extra) == ("sink_failed", 2, 3, {"later": True})


def test_completion_and_torrent_carry_transport_and_encryption():
    c = Completion.from_json('{"type":"completion","schema":1,"info_hash":"' + "cd" * 20 + '","outcome":"accepted",'
                             '"failure":null,"attempts":1,"peer":"127.0.0.1:9","encryption":"rc4",'
                             '"transport":"utp","round":0}')
    assert (c.encryption, c.transport, c.extra) == ("rc4", "utp", {})
    failed = Completion.from_json('{"type":"completion","outcome":"fetch_failed","failure":"utp_timeout",'
                                  '"peer":null,"encryption":null,"transport":null}')
    assert (failed.failure, failed.encryption, failed.transport) == ("utp_timeout", None, None)
    assert {"encryption_failed", "utp_timeout", "cancelled"} <= set(dhtcrawler.FAILURE_CLASSES)
    assert dhtcrawler.FAILURE_CLASSES.index("encryption_failed") == 15  # the library's order, none left out
    t = dhtcrawler.Torrent.from_json('{"schema":1,"info_hash":"' + "cd" * 20 + '","info_hash_v1":null,'
                                     '"info_hash_v2":null,"version":"v1","name":"n","total_size":1,"num_files":1,'
                                     '"piece_length":16384,"private":false,"files":[{"path":"n","size":1}],'
                                     '"peer":"127.0.0.1:9","encryption":"plaintext","transport":"tcp"}')
    assert (t.encryption, t.transport, t.extra) == ("plaintext", "tcp", {})


def test_retry_from_json():
    r = Retry.from_json('{"type":"retry","schema":1,"info_hash":"' + "ef" * 20 + '","state":"dormant","attempts":2,'
                        '"failure":"no_peers","next_retry_at":1767312000}')
    assert (r.state, r.attempts, r.failure) == ("dormant", 2, "no_peers")
    assert r.next_retry_at is not None and r.next_retry_at.timestamp() == 1767312000
    done = Retry.from_json('{"type":"retry","schema":1,"info_hash":"' + "ef" * 20 + '","state":"done","attempts":0,'
                           '"failure":null,"next_retry_at":null}')
    assert done.state == "done" and done.next_retry_at is None and done.failure is None
    assert isinstance(Retry.from_json("{}"), Retry)


def test_decode_event_types_and_unknown_ones():
    from dhtcrawler._types import GateRequest, TorrentRequest, decode_event

    assert decode_event('{"type":"gate","schema":1,"id":7,"info_hash":"' + "ab" * 20 + '"}') == \
        GateRequest(7, "ab" * 20)
    assert isinstance(decode_event('{"type":"retry","schema":1,"state":"done"}'), Retry)
    assert isinstance(decode_event('{"type":"completion","schema":1,"outcome":"accepted"}'), Completion)
    assert decode_event('{"type":"error","schema":1,"message":"m"}') == dhtcrawler.Error("m")
    assert decode_event('{"type":"a_new_kind","schema":1}') is None
    assert decode_event("garbage") is None
    torrent = {"schema": 1, "info_hash": "ab" * 20, "info_hash_v1": "ab" * 20, "info_hash_v2": None, "version": "v1",
               "name": "n", "total_size": 1, "num_files": 1, "piece_length": 16384, "private": False,
               "files": [{"path": "n", "size": 1}]}
    ev = decode_event(json.dumps({"type": "torrent", "schema": 1, "id": 9, "torrent": torrent}), b"d4:infoe")
    assert isinstance(ev, TorrentRequest) and ev.id == 9 and ev.torrent.name == "n" and ev.torrent.info == b"d4:infoe"


def test_observations_and_scrapes_decode_their_port_time_and_timeout():
    at = datetime(2026, 1, 2, tzinfo=timezone.utc)
    lookup = Observation.from_json('{"type":"observation","schema":1,"info_hash":"' + "ab" * 20 +
                                   '","source":"1.2.3.4:6881","kind":"get_peers","port":null,"at":1767312000}')
    assert lookup == Observation("ab" * 20, "1.2.3.4:6881", "get_peers", None, at)
    announce = Observation.from_json('{"type":"observation","schema":1,"info_hash":"' + "ab" * 20 +
                                     '","source":"1.2.3.4:6881","kind":"announce","port":51413,"at":1767312000}')
    assert (announce.kind, announce.port, announce.at) == ("announce", 51413, at)
    assert Observation.from_json('{"type":"observation","kind":"get_peers"}').at is None  # an older library
    ended = Scrape.from_json('{"type":"scrape","schema":1,"info_hash":"' + "cd" * 20 + '","seeders":0,"leechers":0,'
                             '"responders":0,"queried":0,"timed_out":true,"at":1767312000}')
    assert ended.timed_out and ended.responders == 0 and ended.at == at
    assert not Scrape.from_json('{"type":"scrape","seeders":3}').timed_out


# ---- callbacks -----------------------------------------------------------------------------

def test_an_announce_is_observed_with_its_node_port_and_time(announcer):
    observations = []
    key = b"\x5d" * 20
    with dhtcrawler.Crawler(loopback_options()) as crawler:
        crawler.on_observation(observations.append)
        crawler.start()
        before = int(time.time())
        announcer.announce(port_of(crawler.endpoints[0]), key, 51413)
        assert wait_for(lambda: any(o.kind == "announce" for o in observations), 20), observations
        after = int(time.time())
    announce = next(o for o in observations if o.kind == "announce")
    host, port = announcer.sock.getsockname()
    assert isinstance(announce, Observation)
    assert (announce.info_hash, announce.source, announce.port) == (key.hex(), f"{host}:{port}", 51413)
    assert before <= announce.at.timestamp() <= after


def test_a_scrape_with_no_node_to_ask_ends_timed_out():
    scrapes = []
    with dhtcrawler.Crawler(loopback_options(crawl={"scrape": {"timeout_secs": 1}})) as crawler:
        crawler.on_scrape(scrapes.append)
        crawler.start()
        crawler.request_scrape("5c" * 20)  # no bootstrap source: the crawler knows no node
        assert wait_for(lambda: scrapes, 20)
    (ended,) = scrapes
    assert isinstance(ended, Scrape)
    assert (ended.info_hash, ended.timed_out, ended.responders, ended.queried) == ("5c" * 20, True, 0, 0)


def test_retry_events_have_their_own_callback(tmp_path, metadata_peer, announcer):
    key = next(iter(metadata_peer.infos))
    retries, completions = [], []
    with dhtcrawler.Crawler(loopback_options(retry=sqlite_store(tmp_path))) as crawler:
        crawler.on_torrent(lambda t: True, ack=True)
        crawler.on_completion(completions.append)
        crawler.on_retry(retries.append)
        crawler.start()
        announcer.announce(port_of(crawler.endpoints[0]), key, metadata_peer.port)
        assert wait_for(lambda: retries, 20), completions
    assert all(isinstance(c, Completion) and c.outcome == "accepted" for c in completions), completions
    assert [(r.info_hash, r.state) for r in retries] == [(key.hex(), "done")]
    assert isinstance(retries[0], Retry) and retries[0].next_retry_at is None


def test_answer_retry_completes_sink_failed_and_the_next_announce_fetches_again(metadata_peer, announcer):
    """Needs the core that implements DHTC_ANSWER_RETRY (store none: kept out of the
    delivered filter, so the next announce fetches it again)."""
    key = next(iter(metadata_peer.infos))
    torrents, completions = [], []

    def on_torrent(t: dhtcrawler.Torrent):
        torrents.append(t)
        return Answer.RETRY if len(torrents) == 1 else True

    with dhtcrawler.Crawler(loopback_options()) as crawler:
        crawler.on_torrent(on_torrent, ack=True)
        crawler.on_completion(completions.append)
        crawler.start()
        port = port_of(crawler.endpoints[0])
        announcer.announce(port, key, metadata_peer.port)
        assert wait_for(lambda: completions, 20)
        assert completions[0].outcome == "sink_failed", completions

        def again():
            announcer.announce(port, key, metadata_peer.port)
            return any(c.outcome == "accepted" for c in completions)

        assert wait_for(again, 20, 0.5), completions
    assert len(torrents) == 2 and torrents[1].info_hash == key.hex()


# ---- polling -------------------------------------------------------------------------------

def test_polling_returns_typed_events_and_takes_answers(tmp_path, metadata_peer, announcer):
    key = next(iter(metadata_peer.infos))
    seen = []
    with dhtcrawler.Crawler(loopback_options(retry=sqlite_store(tmp_path))) as crawler:
        crawler.enable_polling()
        crawler.start()
        announcer.announce(port_of(crawler.endpoints[0]), key, metadata_peer.port)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any(isinstance(e, Retry) for e in seen):
            event = crawler.poll(0.5)
            if event is None:
                continue
            seen.append(event)
            if isinstance(event, dhtcrawler.GateRequest):
                assert crawler.answer(event, True)
            elif isinstance(event, dhtcrawler.TorrentRequest):
                assert event.torrent.info_hash == key.hex() and event.torrent.info
                assert crawler.answer(event.id, Answer.ACCEPT)
                assert not crawler.answer(event.id, Answer.ACCEPT)  # answered already
        crawler.shutdown()
        rest = list(crawler.events(timeout=5))  # ends once drained after shutdown
    kinds = [type(e).__name__ for e in seen]
    assert "GateRequest" in kinds and "TorrentRequest" in kinds, kinds
    assert [e.outcome for e in seen if isinstance(e, Completion)] == ["accepted"], seen
    # The loopback peer speaks plaintext TCP: both forms say so, typed.
    done = [e for e in seen if isinstance(e, Completion)][0]
    assert (done.encryption, done.transport) == ("plaintext", "tcp"), done
    served = [e.torrent for e in seen if isinstance(e, dhtcrawler.TorrentRequest)][0]
    assert (served.encryption, served.transport) == ("plaintext", "tcp"), served
    assert [(e.state, e.info_hash) for e in seen if isinstance(e, Retry)] == [("done", key.hex())], seen
    assert all(not isinstance(e, (dhtcrawler.GateRequest, dhtcrawler.TorrentRequest)) for e in rest)


class _ScriptedPolls:
    """Stands in for the extension's poll: first the scripted envelopes, then the real one."""

    def __init__(self, native, script):
        self.native, self.script = native, list(script)

    def poll(self, timeout_ms):
        if self.script:
            return self.script.pop(0)
        return self.native.poll(timeout_ms)

    def __getattr__(self, name):
        return getattr(self.native, name)


def test_polling_skips_unknown_types_with_one_log_line(caplog):
    crawler = dhtcrawler.Crawler(loopback_options())
    crawler.enable_polling()
    crawler.start()
    native = crawler._native
    crawler._native = _ScriptedPolls(native, [
        ('{"type":"hologram","schema":1}', None),
        ('{"type":"hologram","schema":1,"again":true}', None),
        ('{"type":"completion","schema":1,"info_hash":"' + "ab" * 20 + '","outcome":"sink_failed"}', None),
    ])
    try:
        with caplog.at_level(logging.INFO, logger="dhtcrawler"):
            event = crawler.poll(1)
        assert isinstance(event, Completion) and event.outcome == "sink_failed"
        assert crawler.poll(0.05) is None
    finally:
        crawler._native = native
        crawler.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "dhtcrawler" and "hologram" in r.getMessage()]
    assert len(lines) == 1, lines


def test_poll_after_shutdown_drains_then_raises_state_error():
    crawler = dhtcrawler.Crawler(loopback_options())
    crawler.enable_polling()
    crawler.start()
    crawler.shutdown()
    with pytest.raises(dhtcrawler.StateError):
        for _ in range(1000):
            crawler.poll(1)
    crawler.close()
    with pytest.raises(dhtcrawler.StateError):
        crawler.poll(0)
