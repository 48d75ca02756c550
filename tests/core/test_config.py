import pytest

from graphmend.core.config import Config, ConfigError, load_config, split_codes


def test_load_and_flags(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.mend]\ntargets = ["pkg.mod:fn"]\nselect = ["gm1,GM2"]\ntimeout = 7\n')
    (tmp_path / "sub").mkdir()
    cfg = load_config([tmp_path / "sub"])
    assert cfg.root == tmp_path and cfg.targets == ("pkg.mod:fn",) and cfg.select == ("GM1", "GM2") and cfg.timeout == 7
    assert cfg.rule_enabled("GM101") and not cfg.rule_enabled("GM301")
    assert cfg.with_flags(ignore=["GM101"], select=None).rule_enabled("GM101") is False


@pytest.mark.parametrize("body,needle", [("[tool.mend]\nbogus = 1\n", "unknown key"),
                                         ("[tool.mend]\ntimeout = -1\n", "timeout"),
                                         ("[tool.mend\n", "cannot read")])
def test_bad_config(tmp_path, body, needle):
    (tmp_path / "pyproject.toml").write_text(body)
    with pytest.raises(ConfigError, match=needle):
        load_config([tmp_path])


def test_defaults_and_split(tmp_path):
    assert split_codes(["gm101, GM2", "GM3"]) == ["GM101", "GM2", "GM3"]
    assert Config().timeout == 300.0


@pytest.mark.parametrize("value,expected", [('"4G"', 4 << 30), ('"512M"', 512 << 20), ('"1.5GiB"', 3 << 29),
                                            ('"2gb"', 2 << 30), (str(1 << 30), 1 << 30)])
def test_memory_limit(tmp_path, value, expected):
    (tmp_path / "pyproject.toml").write_text(f"[tool.mend]\nmemory_limit = {value}\n")
    cfg = load_config([tmp_path])
    assert cfg.memory_limit == expected
    assert cfg.with_flags(memory_limit=None).memory_limit == expected  # no flag: the file's value
    assert cfg.with_flags(memory_limit=1 << 30).memory_limit == 1 << 30  # a flag wins
    assert Config().memory_limit is None  # no limit unless asked


@pytest.mark.parametrize("value,needle", [('"4X"', "is not a size"), ('"4"', "did you mean 4G?"),
                                          ("true", "is not a size"), ('"-1G"', "is not a size")])
def test_bad_memory_limit(tmp_path, value, needle):
    (tmp_path / "pyproject.toml").write_text(f"[tool.mend]\nmemory_limit = {value}\n")
    with pytest.raises(ConfigError, match=needle) as exc:
        load_config([tmp_path])
    assert "[tool.mend] memory_limit" in str(exc.value) and str(tmp_path / "pyproject.toml") in str(exc.value)


@pytest.mark.parametrize("body,needle", [
    ("tool = 5\n", "tool must be a table"),
    ("[tool]\nmend = 5\n", "[tool.mend] must be a table, not an integer"),
    ('[tool.mend]\nall_functions = "no"\n', "[tool.mend] all_functions must be true or false, not 'no'"),
    ("[tool.mend]\nall-functions = 0\n", "[tool.mend] all-functions must be true or false, not an integer"),
    ("[tool.mend]\nbaseline = 5\n", "[tool.mend] baseline must be a path (a non-empty string), not an integer"),
    ('[tool.mend]\nbaseline = ""\n', "[tool.mend] baseline must be a path"),
    ("[tool.mend]\ntimeout = true\n", "[tool.mend] timeout must be a positive number (seconds), not a boolean"),
    ("[tool.mend]\nexecutor = 5\n", '[tool.mend] executor must be "local" or "ray", not an integer'),
    ('[tool.mend]\nselect = "GM1"\n', "[tool.mend] select must be an array of strings, not 'GM1'"),
    ('[tool.mend]\nray_address = ["a"]\n', "[tool.mend] ray_address must be an address"),
    ("[tool.mend]\nmodes = \"train\"\n", "[tool.mend] modes must be an array of strings"),
    ("[tool.mend]\nall_functions = true\nall-functions = false\n", "give all_functions or all-functions, not both"),
])
def test_every_key_is_type_checked_in_one_line_naming_key_type_and_file(tmp_path, body, needle):
    (tmp_path / "pyproject.toml").write_text(body)
    with pytest.raises(ConfigError) as exc:
        load_config([tmp_path])
    message = str(exc.value)
    assert needle in message and message.startswith(f"{tmp_path / 'pyproject.toml'}: ") and "\n" not in message


@pytest.mark.parametrize("value", ["../../x.json", "../x.json", "/tmp/mend-elsewhere.json", "sub/../../x.json"])
def test_a_config_baseline_outside_the_project_is_refused(tmp_path, value):
    (tmp_path / "pyproject.toml").write_text(f'[tool.mend]\nbaseline = "{value}"\n')
    with pytest.raises(ConfigError, match=r"\[tool.mend\] baseline .* is outside the project folder"):
        load_config([tmp_path])


def test_a_config_baseline_inside_the_project_is_kept(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.mend]\nbaseline = "ci/../gate/base.json"\nall_functions = false\n')
    cfg = load_config([tmp_path])
    assert cfg.baseline == "ci/../gate/base.json" and cfg.all_functions is False


def test_a_config_baseline_through_a_symlink_out_of_the_project_is_refused(tmp_path):
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (project / "gate").symlink_to(outside, target_is_directory=True)
    (project / "pyproject.toml").write_text('[tool.mend]\nbaseline = "gate/base.json"\n')
    with pytest.raises(ConfigError, match="outside the project folder"):
        load_config([project])
