from __future__ import annotations

import pytest

from cairn.cli import main, options


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
    with pytest.raises(ValueError, match="--input") as info:
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
