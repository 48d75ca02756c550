import pytest

from graphmend.config import Config, ConfigError, load_config, split_codes


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
