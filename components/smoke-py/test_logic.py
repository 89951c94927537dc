"""Unit tests of the Python smoke logic under plain CPython, against an in-memory fake of the
capabilities: `PYTHONPATH=../guest-py python3 -m unittest` in this directory (`tests/twins.rs`
runs it)."""

import json
import unittest

import lethe_guest
import logic


class FakeHost:
    """Answers exactly the statements the smoke logic makes; `fail` makes every call fail."""

    def __init__(self, fail=False):
        self.notes = {}
        self.ticks = set()
        self.fail = fail
        self.namespaces = {"team-a": {"status": {"phase": "Active"}}}
        self.readers = {"alice"}
        self.kube_calls = 0

    def query(self, sql, params):
        if self.fail:
            raise lethe_guest.Failed("database down")
        if sql.startswith("SELECT name, body FROM smoke_py_note ORDER BY"):
            return [[n, b] for n, b in sorted(self.notes.items())]
        if sql.startswith("SELECT name, body"):
            return [[params[0], self.notes[params[0]]]] if params[0] in self.notes else []
        if sql.startswith("SELECT 1"):
            return [[1]] if params[0] in self.notes else []
        if sql.startswith("SELECT COUNT(*) FROM smoke_py_tick"):
            return [[len(self.ticks)]]
        raise lethe_guest.Failed(f"unexpected query {sql}")

    def execute(self, sql, params):
        if self.fail:
            raise lethe_guest.Failed("database down")
        if sql.startswith("INSERT INTO smoke_py_note"):
            if not params[1]:
                raise lethe_guest.Constraint("smoke_py_note_body_not_empty")
            self.notes[params[0]] = params[1]
            return 1
        if sql.startswith("INSERT INTO smoke_py_tick"):
            fresh = params[0] not in self.ticks
            self.ticks.add(params[0])
            return int(fresh)
        raise lethe_guest.Failed(f"unexpected statement {sql}")

    def config(self, key):
        return "hello from config" if key == "greeting" else None

    def get(self, token, api_version, kind, namespace, name):
        self.kube_calls += 1
        if token == "stale":
            raise lethe_guest.KubeError("unauthorized", "Unauthorized")
        if token not in self.readers:
            raise lethe_guest.KubeError("forbidden", "namespaces is forbidden")
        if name not in self.namespaces:
            raise lethe_guest.KubeError("not-found", name)
        return self.namespaces[name]


def call(host, method, path_info, body=b"", token=None):
    headers = {"spin-path-info": path_info.encode()}
    if token is not None:
        headers["authorization"] = f"Bearer {token}".encode()
    response = logic.handle(host, lethe_guest.Request(method, "/smoke-py" + path_info, headers, body))
    return response.status, json.loads(response.body)


class Notes(unittest.TestCase):
    def test_put_creates_then_replaces(self):
        host = FakeHost()
        self.assertEqual(call(host, "PUT", "/notes/a", b"one")[0], 201)
        self.assertEqual(call(host, "PUT", "/notes/a", b"two")[0], 200)
        self.assertEqual(call(host, "GET", "/notes/a"), (200, {"name": "a", "body": "two"}))
        self.assertEqual(call(host, "GET", "/notes")[1], {"resources": [{"name": "a", "body": "two"}]})

    def test_bad_input_gets_the_documented_errors(self):
        host = FakeHost()
        for method, path, body, status, code in [
            ("GET", "/notes/nope", b"", 404, 10010),
            ("PUT", "/notes/bad name", b"x", 422, 10008),
            ("PUT", "/notes/empty", b"", 422, 10008),
            ("PUT", "/notes/bin", b"\xff\xfe", 400, 1001),
            ("PUT", "/notes/nul", b"a\x00b", 422, 10008),
            ("DELETE", "/notes", b"", 405, 10000),
            ("GET", "/elsewhere", b"", 404, 10010),
        ]:
            status_got, envelope = call(host, method, path, body)
            self.assertEqual((status_got, envelope["errors"][0]["code"]), (status, code), path)

    def test_a_failing_database_is_an_unknown_error(self):
        status, envelope = call(FakeHost(fail=True), "GET", "/notes")
        self.assertEqual((status, envelope["errors"][0]["code"]), (500, 10001))


class Ticks(unittest.TestCase):
    def test_ticks_are_recorded_once_per_second(self):
        host = FakeHost()
        for timestamp in (100, 100, 101):
            logic.record_tick(host, timestamp)
        self.assertEqual(call(host, "GET", "/ticks"), (200, {"count": 2}))

    def test_greeting_comes_from_configuration(self):
        self.assertEqual(call(FakeHost(), "GET", "/greeting")[1], {"greeting": "hello from config"})


class Namespaces(unittest.TestCase):
    def test_read_as_the_caller(self):
        host = FakeHost()
        self.assertEqual(
            call(host, "GET", "/namespaces/team-a", token="alice"),
            (200, {"name": "team-a", "phase": "Active"}),
        )
        self.assertEqual(call(host, "GET", "/namespaces/team-b", token="alice")[0], 404)
        # Bob may not read namespaces: refused alike whether one exists or not.
        for name in ("team-a", "team-b"):
            status, envelope = call(host, "GET", f"/namespaces/{name}", token="bob")
            self.assertEqual((status, envelope["errors"][0]["code"]), (403, 10003))

    def test_credentials_and_names_are_checked(self):
        host = FakeHost()
        self.assertEqual(call(host, "GET", "/namespaces/team-a")[1]["errors"][0]["code"], 10002)
        self.assertEqual(call(host, "GET", "/namespaces/team-a", token="stale")[0], 401)
        malformed = {"spin-path-info": b"/namespaces/team-a", "authorization": b"Bearer a b"}
        response = logic.handle(host, lethe_guest.Request("GET", "/", malformed))
        self.assertEqual(json.loads(response.body)["errors"][0]["code"], 1000)
        calls = host.kube_calls
        self.assertEqual(call(host, "GET", "/namespaces/Team_A", token="bob")[0], 404)
        self.assertEqual(host.kube_calls, calls, "no cluster call for a name no Namespace has")


if __name__ == "__main__":
    unittest.main()
