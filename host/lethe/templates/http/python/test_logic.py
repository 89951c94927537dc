"""Unit tests of the `__NAME__` logic under plain CPython, against a fake of the capabilities
backed by a real SQLite database with the component's migrations:
`PYTHONPATH=__SDK__ python3 -m unittest` in this directory."""

import json
import pathlib
import sqlite3
import unittest

import lethe_guest
import logic

HERE = pathlib.Path(__file__).parent


class FakeHost:
    """SQLite with this component's migrations, and a cluster of ConfigMaps that only `alice`
    may list."""

    def __init__(self):
        self.db = sqlite3.connect(":memory:")
        for migration in sorted((HERE / "migrations").glob("*.sql")):
            self.db.executescript(migration.read_text())
        self.configmaps = {"team": ["b", "a"]}

    def _run(self, statement, params):
        # lethe's dialect numbers its placeholders; SQLite reads `$1` as a named one.
        try:
            return self.db.execute(statement, {str(i + 1): p for i, p in enumerate(params)})
        except sqlite3.IntegrityError as e:
            raise lethe_guest.Constraint(str(e))

    def query(self, statement, params):
        return [list(row) for row in self._run(statement, params).fetchall()]

    def execute(self, statement, params):
        return self._run(statement, params).rowcount

    def list(self, token, api_version, kind, namespace):
        if token != "alice":
            raise lethe_guest.KubeError("forbidden", "configmaps is forbidden")
        names = self.configmaps.get(namespace, [])
        return [{"metadata": {"name": n, "namespace": namespace}} for n in names]


def call(host, method, path_info, body=b"", token=None):
    headers = {"spin-path-info": path_info.encode()}
    if token is not None:
        headers["authorization"] = f"Bearer {token}".encode()
    response = logic.handle(host, lethe_guest.Request(method, "/__NAME__" + path_info, headers, body))
    return response.status, json.loads(response.body)


class Items(unittest.TestCase):
    def test_items_are_stored_replaced_and_listed(self):
        host = FakeHost()
        self.assertEqual(call(host, "PUT", "/items/a", b"one")[0], 201)
        self.assertEqual(call(host, "PUT", "/items/a", b"two")[0], 200)
        self.assertEqual(call(host, "GET", "/items/a"), (200, {"key": "a", "body": "two"}))
        self.assertEqual(call(host, "GET", "/items")[1], {"resources": [{"key": "a", "body": "two"}]})

    def test_bad_input_gets_the_documented_errors(self):
        host = FakeHost()
        for method, path, body, status, code in [
            ("GET", "/items/absent", b"", 404, 10010),
            ("PUT", "/items/bad key", b"x", 422, 10008),
            ("PUT", "/items/empty", b"", 422, 10008),
            ("PUT", "/items/bin", b"\xff", 400, 1001),
            ("DELETE", "/items", b"", 405, 10000),
            ("GET", "/elsewhere", b"", 404, 10000),
        ]:
            got, envelope = call(host, method, path, body)
            self.assertEqual((got, envelope["errors"][0]["code"]), (status, code), path)


class ConfigMaps(unittest.TestCase):
    def test_listed_as_the_caller_sees_them(self):
        host = FakeHost()
        self.assertEqual(
            call(host, "GET", "/configmaps/team", token="alice"),
            (200, {"namespace": "team", "configmaps": ["a", "b"]}),
        )
        self.assertEqual(call(host, "GET", "/configmaps/team", token="bob")[0], 403)
        self.assertEqual(call(host, "GET", "/configmaps/team")[1]["errors"][0]["code"], 10002)


if __name__ == "__main__":
    unittest.main()
