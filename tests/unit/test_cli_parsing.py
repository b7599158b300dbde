from __future__ import annotations

import argparse
import re

import pytest

from cairn.cli import main, options, queues


def test_parse_value__json_when_it_parses():
    assert options.parse_value("42") == 42
    assert options.parse_value("2.5") == 2.5
    assert options.parse_value("true") is True
    assert options.parse_value("null") is None
    assert options.parse_value('{"a": [1, "x"]}') == {"a": [1, "x"]}
    assert options.parse_value('"42"') == "42"


def test_parse_value__string_otherwise():
    assert options.parse_value("o-1") == "o-1"
    assert options.parse_value("hello world") == "hello world"
    assert options.parse_value("") == ""
    assert options.parse_value("{not json") == "{not json"


def test_parse_value__nan_and_infinity_stay_words():
    assert options.parse_value("NaN") == "NaN"
    assert options.parse_value("Infinity") == "Infinity"
    assert options.parse_value("1e999") == "1e999"


def test_parse_input__object_of_keyword_arguments():
    assert options.parse_input('{"label": "x", "n": 2}') == {"label": "x", "n": 2}
    assert options.parse_input(None) == {}


@pytest.mark.parametrize(
    ("text", "culprit"), [("{bad", "not valid JSON"), ("[1, 2]", "JSON object"), ("3", "int")]
)
def test_parse_input__bad_json_names_the_option(text, culprit):
    with pytest.raises(options.UsageError, match="--input") as info:
        options.parse_input(text)
    assert culprit in str(info.value)


def test_parse_where__values_are_json_or_string():
    where = options.parse_where(["order_no=42", "status=paid", "vip=true", "note=a=b", "x="])
    assert where == {"order_no": 42, "status": "paid", "vip": True, "note": "a=b", "x": ""}


@pytest.mark.parametrize("item", ["novalue", "=3", "bad name=1", "a;drop=1"])
def test_parse_where__bad_syntax_names_the_item(item):
    with pytest.raises(ValueError, match="--where"):
        options.parse_where([item])


def test_parse_where__same_column_twice_is_refused():
    with pytest.raises(ValueError, match="'a' twice"):
        options.parse_where(["a=1", "a=2"])


def test_run__positional_args_and_options():
    ns = main.parse(["run", "shop:flow", "1", "o-1", "--input", '{"k": 1}', "--run-id", "r1"])
    assert ns.command == "run"
    assert ns.target == "shop:flow"
    assert ns.args == ["1", "o-1"]
    assert ns.input == '{"k": 1}'
    assert ns.run_id == "r1"
    assert ns.enqueue is False


def test_run__args_after_options_are_kept_in_order():
    ns = main.parse(["run", "shop:flow", "1", "--run-id", "r1", "2", "--enqueue", "3"])
    assert ns.args == ["1", "2", "3"]
    assert ns.run_id == "r1"
    assert ns.enqueue is True


def test_run__negative_numbers_and_dash_dash():
    assert main.parse(["run", "shop:flow", "-5", "-2.5"]).args == ["-5", "-2.5"]
    assert main.parse(["run", "shop:flow", "--", "-x", "--y"]).args == ["-x", "--y"]


def test_run__unknown_option_is_bad_usage(capsys):
    with pytest.raises(SystemExit) as info:
        main.parse(["run", "shop:flow", "1", "--bogus"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("error: unrecognized arguments: --bogus")


def test_global_options__before_or_after_the_command():
    ns = main.parse(["--db", "sqlite:///a.db", "-m", "one", "runs", "list", "-m", "two"])
    glob = options.resolve_globals(ns)
    assert glob.url == "sqlite:///a.db"
    assert glob.modules == ("one", "two")
    ns = main.parse(["runs", "show", "r1", "--db", "sqlite:///b.db", "--module", "three"])
    glob = options.resolve_globals(ns)
    assert glob.url == "sqlite:///b.db"
    assert glob.modules == ("three",)


def test_global_options__command_db_wins_over_global():
    ns = main.parse(["--db", "sqlite:///a.db", "db", "upgrade", "--db", "sqlite:///b.db"])
    assert options.resolve_globals(ns).url == "sqlite:///b.db"


def test_global_options__environment_then_default(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CAIRN_MODULES", raising=False)
    monkeypatch.setenv("CAIRN_DATABASE_URL", "sqlite:///env.db")
    assert options.resolve_globals(main.parse(["runs", "list"])).url == "sqlite:///env.db"
    monkeypatch.delenv("CAIRN_DATABASE_URL")
    glob = options.resolve_globals(main.parse(["runs", "list"]))
    assert glob.url == "sqlite:///cairn.db"
    assert glob.modules == ()


def test_global_options__pyproject(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CAIRN_DATABASE_URL", raising=False)
    monkeypatch.delenv("CAIRN_MODULES", raising=False)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.cairn]\nurl = "sqlite:///from_pyproject.db"\nmodules = ["shop.flows"]\n'
    )
    glob = options.resolve_globals(main.parse(["runs", "list"]))
    assert glob.url == "sqlite:///from_pyproject.db"
    assert glob.modules == ("shop.flows",)


def test_runs_list__filters():
    argv = "runs list --status failed --workflow w --where a=1 b=x --where c=2 --limit 5 --json"
    ns = main.parse(argv.split())
    assert ns.status == "failed"
    assert ns.workflow == "w"
    assert ns.where == [["a=1", "b=x"], ["c=2"]]
    assert ns.limit == 5
    assert ns.json is True


def test_worker__options():
    ns = main.parse(["worker", "--concurrency", "4", "--queue", "a", "b", "--lease", "30s"])
    assert ns.concurrency == 4
    assert ns.queue == [["a", "b"]]
    assert ns.lease == "30s"
    assert main.parse(["worker"]).lease == "10s"


def test_worker__observability_options():
    ns = main.parse(["worker", "--log-format", "json", "--metrics-port", "9464"])
    assert (ns.log_format, ns.metrics_port, ns.metrics_host) == ("json", 9464, "0.0.0.0")
    plain = main.parse(["worker"])
    assert (plain.log_format, plain.metrics_port) == ("text", None)


def test_worker__bad_metrics_port_is_one_error_line(capsys):
    assert main.run(["worker", "--metrics-port", "70000"]) != 0
    err = capsys.readouterr().err
    assert err == "error: --metrics-port must be a port number, got 70000\n"


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["bogus"],
        ["runs"],
        ["runs", "show"],
        ["runs", "list", "--limit", "x"],
        ["run"],
        ["worker", "--concurrency", "many"],
        ["worker", "--log-format", "xml"],
        ["db"],
    ],
)
def test_bad_usage__one_line_and_exit_2(argv, capsys):
    assert main.run(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("error: ")


def test_help__exit_0(capsys):
    assert main.run(["--help"]) == 0
    assert "run" in capsys.readouterr().out


def test_send__event_payload_and_key():
    ns = main.parse(["send", "r1", "approval", '{"ok": true}', "--key", "k1"])
    assert (ns.run_id, ns.event, ns.payload, ns.key) == ("r1", "approval", '{"ok": true}', "k1")
    ns = main.parse(["send", "r1", "ping"])
    assert ns.payload is None
    assert ns.key is None


@pytest.mark.parametrize("verb", ["cancel", "pause", "resume", "retry", "restart"])
def test_runs_verbs__take_a_run_id_and_json(verb):
    ns = main.parse(["runs", verb, "r1", "--json"])
    assert ns.run_id == "r1"
    assert ns.json is True
    assert callable(ns.handler)


def test_runs_fork__from_step_is_an_int():
    ns = main.parse(["runs", "fork", "r1", "--from-step", "3"])
    assert (ns.run_id, ns.from_step) == ("r1", 3)


def test_tasks__list_defaults_and_submit():
    ns = main.parse(["tasks", "list"])
    assert (ns.status, ns.all, ns.assignee, ns.run) == (None, False, None, None)
    ns = main.parse(["tasks", "list", "--all", "--assignee", "ann", "--run", "r1"])
    assert (ns.all, ns.assignee, ns.run) == (True, "ann", "r1")
    ns = main.parse(["tasks", "submit", "t1", '{"ok": true}', "--by", "bob"])
    assert (ns.task_id, ns.values, ns.by) == ("t1", '{"ok": true}', "bob")


def test_queues_set__omitted_limits_are_absent_and_none_removes():
    ns = main.parse(["queues", "set", "mail", "--concurrency", "4", "--rate", "none"])
    assert queues.changes(ns) == {"concurrency": 4, "rate": None}
    ns = main.parse(["queues", "set", "mail", "--per-worker", "none"])
    assert queues.changes(ns) == {"per_worker": None}
    ns = main.parse(["queues", "set", "mail", "--partition-concurrency", "2", "--rate", "5/1s"])
    assert queues.changes(ns) == {"partition_concurrency": 2, "rate": "5/1s"}


def test_queues_set__nothing_to_change_is_bad_usage():
    with pytest.raises(options.UsageError, match="nothing to change"):
        queues.changes(main.parse(["queues", "set", "mail"]))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--concurrency", "0"], "--concurrency must be a positive integer or none, got 0"),
        (["--per-worker", "-1"], "--per-worker must be a positive integer or none"),
        (["--rate", "fast"], "invalid --rate: 'fast'"),
        (["--rate", "0/1m"], "count and period must be positive"),
    ],
)
def test_queues_set__bad_limits_name_the_option(argv, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        queues.changes(main.parse(["queues", "set", "mail", *argv]))


def test_limit__number_or_none():
    assert options.limit("3") == 3
    assert options.limit("None") is None
    with pytest.raises(argparse.ArgumentTypeError, match="'x'"):
        options.limit("x")


def test_parse_object__names_what_was_given():
    assert options.parse_object('{"ok": true}', what="JSON") == {"ok": True}
    with pytest.raises(options.UsageError, match="JSON is not valid JSON"):
        options.parse_object("{", what="JSON")
    with pytest.raises(options.UsageError, match="must be a JSON object of values, got list"):
        options.parse_object("[1]", what="JSON")


def test_init__directory_defaults_to_here():
    assert main.parse(["init"]).directory == "."
    assert main.parse(["init", "shop"]).directory == "shop"


COMMANDS = [
    ["init", "d"],
    ["run", "m:wf"],
    ["send", "r1", "e"],
    ["check"],
    ["runs", "list"],
    ["runs", "show", "r1"],
    ["runs", "cancel", "r1"],
    ["runs", "pause", "r1"],
    ["runs", "resume", "r1"],
    ["runs", "retry", "r1"],
    ["runs", "restart", "r1"],
    ["runs", "fork", "r1", "--from-step", "2"],
    ["tasks", "list"],
    ["tasks", "show", "t1"],
    ["tasks", "submit", "t1", "{}"],
    ["queues", "list"],
    ["queues", "set", "q", "--concurrency", "1"],
    ["worker"],
    ["db", "upgrade"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(a[:2]) for a in COMMANDS])
def test_every_command__takes_db_and_module(argv):
    glob = options.resolve_globals(main.parse([*argv, "--db", "sqlite:///x.db", "-m", "shop"]))
    assert glob == options.Globals(url="sqlite:///x.db", modules=("shop",))


@pytest.mark.parametrize(
    "argv",
    [
        ["send"],
        ["send", "r1"],
        ["runs", "cancel"],
        ["runs", "fork", "r1"],
        ["runs", "fork", "r1", "--from-step", "x"],
        ["tasks"],
        ["tasks", "submit", "t1"],
        ["tasks", "list", "--status", "open", "--all"],
        ["queues"],
        ["queues", "set"],
        ["queues", "set", "q", "--concurrency", "many"],
        ["queues", "set", "q"],
        ["init", "a", "b"],
        ["check", "extra"],
    ],
)
def test_bad_usage__new_commands_one_line_and_exit_2(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main.run([*argv, "--db", f"sqlite:///{tmp_path / 'x.db'}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("error: ")
    assert not (tmp_path / "x.db").exists()
