"""Config schema, base-file inheritance, dotted overrides and the shipped configs."""

from __future__ import annotations

from pathlib import Path

import pytest

from metacal.train.config import CHOICES, ConfigError, load_config, to_yaml

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"
DATASETS = ("fashion_mnist", "cifar10", "cifar100", "tiny_imagenet")
METHODS = ("ce", "focal", "flsd53", "ls_005", "ls_01", "mixup", "mmce", "ce_dece", "ce_sece", "flgamma_dece",
           "flgamma_sece", "dual_focal", "inverse_focal", "adafocal", "bsce_gra", "focal_savuc", "nll_sbece")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults_are_the_paper_recipe(tmp_path):
    cfg = load_config(write(tmp_path / "c.yaml", "data: {name: mnist1d}\nmodel: {name: mlp}\n"))
    assert (cfg.optim.lr, cfg.optim.momentum, cfg.optim.weight_decay) == (0.1, 0.9, 5e-4)
    assert (cfg.schedule.epochs, cfg.schedule.milestones, cfg.schedule.lr_decay) == (350, [150, 250], 0.1)
    assert (cfg.data.batch_size, cfg.eval.select_by, cfg.eval.num_bins) == (128, "error", 15)
    assert cfg.learner is None and cfg.loss.name == "ce"


def test_base_chain_merges_mappings_and_overrides_win(tmp_path):
    write(tmp_path / "base.yaml", "data: {name: mnist1d, batch_size: 64, options: {n: 5, noise: 0.1}}\n"
                                  "model: {name: mlp}\noptim: {lr: 0.2}\nschedule: {milestones: [5, 8]}\n"
                                  "loss: {name: focal, params: {gamma: 2, extra: {a: 1}}}\n")
    child = write(tmp_path / "sub" / "m.yaml", "base: ../base.yaml\nloss: {params: {extra: {b: 2}}}\n"
                                               "data: {options: {noise: 0.3}}\nschedule: {milestones: [3]}\n")
    cfg = load_config(child, ["optim.lr=0.05", "loss.params.gamma=3", "eval.num_bins=10"])
    assert cfg.data.name == "mnist1d" and cfg.data.batch_size == 64  # from the base
    assert cfg.data.options == {"n": 5, "noise": 0.3}  # free-form mappings merge key by key, too
    assert cfg.loss.params == {"gamma": 3, "extra": {"a": 1, "b": 2}} and cfg.loss.name == "focal"
    assert cfg.schedule.milestones == [3]  # lists are replaced, not concatenated
    assert cfg.optim.lr == 0.05 and cfg.eval.num_bins == 10


def test_list_of_bases_later_wins(tmp_path):
    write(tmp_path / "a.yaml", "data: {name: mnist1d}\nmodel: {name: mlp}\noptim: {lr: 0.2, momentum: 0.5}\n")
    write(tmp_path / "b.yaml", "optim: {lr: 0.3}\nschedule: {milestones: [1, 2, 3]}\n")
    cfg = load_config(write(tmp_path / "c.yaml", "base: [a.yaml, b.yaml]\nschedule: {epochs: 4}\n"))
    assert (cfg.optim.lr, cfg.optim.momentum) == (0.3, 0.5)
    assert (cfg.schedule.epochs, cfg.schedule.milestones) == (4, [1, 2, 3])


def test_bare_exponent_floats_in_files_and_overrides(tmp_path):
    """YAML 1.1 needs a dot (5.0e-4); OmegaConf's loader also reads 5e-4 as a float, in files and in --set."""
    path = write(tmp_path / "c.yaml", "data: {name: mnist1d}\nmodel: {name: mlp}\n"
                                      "optim: {weight_decay: 5e-4}\nloss: {params: {eps: 1e-3}}\n")
    cfg = load_config(path, ["optim.lr=5e-4", "learner=gamma_net", "meta.objective_params.h=2E-2"])
    assert cfg.optim.weight_decay == 0.0005 and cfg.optim.lr == 0.0005
    # free-form mappings keep the YAML type, so these must already be floats, not strings
    assert cfg.loss.params["eps"] == 0.001 and isinstance(cfg.loss.params["eps"], float)
    assert cfg.meta.objective_params["h"] == 0.02 and isinstance(cfg.meta.objective_params["h"], float)


def test_override_values_are_yaml(tmp_path):
    path = write(tmp_path / "c.yaml", "data: {name: mnist1d, root: /data}\nmodel: {name: mlp}\n")
    cfg = load_config(path, ["schedule.milestones=[100,200]", "data.root=null", "learner=gamma_net",
                             "meta.objective=dece", "run.cpu=true", "model.options.note=a=b", "loss.params.tag='3'", "data.seed=7"])
    assert cfg.schedule.milestones == [100, 200] and cfg.data.root is None and cfg.meta.objective == "dece"
    assert cfg.run.cpu is True and cfg.data.seed == 7
    assert cfg.model.options == {"note": "a=b"} and cfg.loss.params == {"tag": "3"}


@pytest.mark.parametrize("overrides, fragments", [
    (["optim.lrr=0.1"], ["unknown config key 'optim.lrr' (did you mean 'optim.lr'?); "
                         "valid keys in optim: name, lr, momentum, weight_decay, nesterov"]),
    (["optimizer.lr=0.1"], ["unknown config key 'optimizer' (did you mean 'optim'?); valid keys at the top "
                            "level: data, model, loss, learner, meta, auto, optim, schedule, eval, logging, run"]),
    (["optim.zzz=1"], ["unknown config key 'optim.zzz'; valid keys in optim:"]),
    (["optim=3"], ["config key 'optim' must be a mapping", "got 3"]),
    (["optim.lr=fast"], ["'optim.lr'", "fast"]),
    (["schedule.milestones=3"], ["'schedule.milestones'"]),
    (["meta.backend=autograd"], ["'meta.backend'", "higher, jvp, head"]),
    (["eval.select_by=acc"], ["'eval.select_by'", "error, nll, ece"]),
    (["meta.horizon=long"], ["'meta.horizon'", "step, trajectory"]),
    (["learner=gamma_net", "meta.shape_lr_scale=-1"], ["meta.shape_lr_scale must be a finite number >= 0", "got -1"]),
    (["meta.shape_lr_scale=-1"], ["override 'meta.shape_lr_scale' has no effect"]),  # a plain run: said as such
    (["meta.horizon_decay=1.5"], ["override 'meta.horizon_decay' has no effect"]),
    (["eval.bootstrap=-1"], ["eval.bootstrap must be >= 0 (0: no confidence intervals)", "got -1"]),
    (["eval.bootstrap=1.5"], ["'eval.bootstrap'"]),
    (["eval.ci_level=1"], ["eval.ci_level must lie strictly between 0 and 1", "got 1"]),
    (["eval.ci_level=0"], ["eval.ci_level must lie strictly between 0 and 1", "got 0"]),
    (["eval.ci_level=.nan"], ["eval.ci_level must lie strictly between 0 and 1", "got nan"]),
    (["eval.ci_method=bca"], ["config key 'eval.ci_method': unknown value 'bca'; available: basic, percentile"]),
    (["optim.lr"], ["section.key=value"]),
    (["data.root"], ["section.key=value"]),  # OmegaConf alone would set the Optional key to None
    (["optim..lr=3"], ["section.key=value"]),  # OmegaConf alone would take key '' inside optim
    (["=3"], ["section.key=value"]),
    (["data.name=[oops"], ["override 'data.name=[oops': not valid YAML ("]),
])
def test_bad_keys_and_values_name_the_key(tmp_path, overrides, fragments):
    path = write(tmp_path / "c.yaml", "data: {name: mnist1d}\nmodel: {name: mlp}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides)
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message


def test_missing_required_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="missing required config key 'model.name'"):
        load_config(write(tmp_path / "c.yaml", "data: {name: mnist1d}\n"))
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="config file not found: .*gone.yaml"):
        load_config(write(tmp_path / "child.yaml", "base: gone.yaml\n"))


def test_circular_base_chains_are_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"loop.yaml: circular 'base:' chain"):
        load_config(write(tmp_path / "loop.yaml", "base: loop.yaml\n"))
    write(tmp_path / "a.yaml", "base: sub/b.yaml\n")
    write(tmp_path / "sub" / "b.yaml", "base: [../ok.yaml, ../a.yaml]\n")
    write(tmp_path / "ok.yaml", "data: {name: mnist1d}\n")
    with pytest.raises(ConfigError, match=r"a.yaml: circular 'base:' chain"):
        load_config(tmp_path / "a.yaml")
    # the same file twice in one list (a diamond, not a cycle) is fine
    write(tmp_path / "m.yaml", "model: {name: mlp}\n")
    cfg = load_config(write(tmp_path / "d.yaml", "base: [ok.yaml, m.yaml, ok.yaml]\n"))
    assert (cfg.data.name, cfg.model.name) == ("mnist1d", "mlp")


@pytest.mark.parametrize("text, fragment", [
    ("data: [1\n", "not valid YAML"),
    ("data: {name: a}\ndata: {name: b}\n", "not valid YAML (while constructing a mapping"),
    ("- 1\n- 2\n", "the top level must be a mapping of sections"),
    ("5\n", "the top level must be a mapping of sections"),
    ("optim: [0.1]\n", "config key 'optim' must be a mapping"),
    ("data: {name: mnist1d}\nmodel: {name: mlp}\nrun: {seed: 1.5}\n", "invalid value for config key 'run.seed'"),
    ("data: {name: mnist1d}\nmodel: {name: mlp}\nloss: {params: 3}\n", "invalid value for config key 'loss.params'"),
])
def test_bad_files_are_one_line(tmp_path, text, fragment):
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path / "c.yaml", text))
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_overrides_of_a_section_no_learner_reads_are_refused(tmp_path):
    plain = write(tmp_path / "plain.yaml", "data: {name: mnist1d}\nmodel: {name: mlp}\nmeta: {lr: 0.5}\n")
    assert load_config(plain).meta.lr == 0.5  # a file's meta keys (a base.yaml shared by methods) stay allowed
    message = ("^override 'meta.lr' has no effect: this run has no learner \\(learner is null: plain training\\); "
               "drop it, or set learner$")
    with pytest.raises(ConfigError, match=message):
        load_config(plain, ["meta.lr=0.1"])
    with pytest.raises(ConfigError, match="^override 'auto.grow' has no effect: this run has no learner"):
        load_config(plain, ["optim.lr=0.05", "auto.grow=2"])
    with pytest.raises(ConfigError, match="^override 'auto.grow' has no effect: learner gamma_net reads the section "
                                          "meta, not auto$"):
        load_config(plain, ["learner=gamma_net", "auto.grow=2"])
    assert load_config(plain, ["learner=gamma_net", "meta.lr=0.1"]).meta.lr == 0.1
    assert load_config(plain, ["learner=auto", "auto.grow=2"]).auto.grow == 2.0
    assert load_config(plain, ["learner=null"]).learner is None


@pytest.mark.parametrize("text, overrides, fragment", [
    ("meta: {enabled: true, learner: auto}\n", [], "config key 'meta.learner' is gone: the top-level key learner "
     "(learner: gamma_net, loss or auto; absent: plain training) chooses the learner; here: learner: auto; drop "
     "meta.enabled and meta.learner (CHANGELOG.md)"),
    ("meta: {enabled: true}\n", [], "config key 'meta.enabled' is gone: the top-level key learner (learner: gamma_net, "
     "loss or auto; absent: plain training) chooses the learner; here: learner: gamma_net;"),
    ("meta: {enabled: false}\n", [], "config key 'meta.enabled' is gone"),
    ("learner: auto\n", ["meta.controller.band=2", "meta.controller.sample=9"], "config key 'meta.controller' is "
     "gone: the automatic scalar's settings are the section auto (here: auto.band, auto.sample; CHANGELOG.md)"),
    ("learner: auto\n", ["meta.lr=2"], "override 'meta.lr' sets the γ-Net's meta.lr; with learner: auto use "
     "auto.first_step"),
    ("learner: auto\n", ["meta.gamma_net={init_gamma: 2}"], "sets the γ-Net's meta.gamma_net.init_gamma; with "
     "learner: auto use auto.start"),
])
def test_the_keys_the_automatic_scalar_borrowed_are_refused_by_their_new_names(tmp_path, text, overrides, fragment):
    path = write(tmp_path / "c.yaml", "data: {name: mnist1d}\nmodel: {name: mlp}\n" + text)
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides)
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_a_config_saved_with_the_old_keys_reads_as_the_new_ones(tmp_path):
    """A run directory's config.yaml written before the learner had its own key loads (evaluate, resume) as the
    config of the same run in the current keys: meta.lr → auto.first_step, meta.gamma_net.init_gamma → auto.start,
    meta.controller → auto."""
    from metacal.train.config import load_saved_config

    old = write(tmp_path / "old.yaml", "data: {name: mnist1d}\nmodel: {name: mlp}\nloss: {name: focal}\n"
                "meta: {enabled: true, learner: auto, lr: 0.5, gamma_net: {init_gamma: 2.0}, controller: "
                "{sample: 64, measure_on: [val]}}\n")
    new = write(tmp_path / "new.yaml", "data: {name: mnist1d}\nmodel: {name: mlp}\nloss: {name: focal}\n"
                "learner: auto\nmeta: {gamma_net: {init_gamma: 2.0}}\n"
                "auto: {first_step: 0.5, start: 2.0, sample: 64, measure_on: [val]}\n")
    cfg = load_saved_config(old)
    assert (cfg.learner, cfg.auto.first_step, cfg.auto.start, cfg.auto.sample) == ("auto", 0.5, 2.0, 64)
    assert to_yaml(cfg) == to_yaml(load_saved_config(new)).replace("lr: 0.0001", "lr: 0.5")
    plain = write(tmp_path / "plain.yaml", "data: {name: mnist1d}\nmodel: {name: mlp}\nmeta: {enabled: false, "
                  "learner: gamma_net, controller: {}}\n")
    assert load_saved_config(plain).learner is None
    flg = write(tmp_path / "flg.yaml", "data: {name: mnist1d}\nmodel: {name: mlp}\nmeta: {enabled: true, "
                "learner: gamma_net, lr: 0.001}\n")
    assert (load_saved_config(flg).learner, load_saved_config(flg).meta.lr) == ("gamma_net", 0.001)


def test_choice_lists_are_the_owners_own():
    from metacal.meta import BACKENDS, HORIZONS, META_OPTIMIZERS
    from metacal.metrics.bootstrap import METHODS
    from metacal.train.config import choices
    from metacal.train.epoch_eval import SELECT_BY
    from metacal.train.optim import OPTIMIZERS
    from metacal.train.schedules import SCHEDULES

    owners = {"meta.backend": tuple(BACKENDS), "meta.horizon": HORIZONS,
              "meta.optimizer": tuple(META_OPTIMIZERS), "optim.name": OPTIMIZERS, "schedule.name": SCHEDULES,
              "eval.select_by": SELECT_BY, "eval.ci_method": METHODS}
    # the meta section's lists come with its dataclass (metacal.meta.MetaSettings.CHOICES), the learner is a registry
    assert set(CHOICES) == set(owners) - {"meta.backend", "meta.horizon", "meta.optimizer"} | {"run.mixed_precision"}
    assert list(choices())[:3] == ["meta.backend", "meta.horizon", "meta.optimizer"]  # the config's section order
    for key, values in owners.items():
        assert tuple(choices()[key]) == tuple(values), key


def test_resolved_config_round_trips(tmp_path):
    cfg = load_config(write(tmp_path / "c.yaml", "data: {name: mnist1d}\nmodel: {name: mlp}\n"
                                                 "loss: {name: focal, params: {gamma: 2.0}}\n"))
    again = load_config(write(tmp_path / "resolved.yaml", to_yaml(cfg)))
    assert again == cfg


def shipped_configs() -> list[Path]:
    return [CONFIGS / "quickstart.yaml", CONFIGS / "quickstart_flgamma_sece.yaml"] + [
        CONFIGS / d / f"{m}.yaml" for d in DATASETS for m in METHODS]


# every dataset folder, the user's own data included, has the recommended method: Focal, auto γ
AUTO_GAMMA = sorted(p for p in CONFIGS.glob("*/auto_gamma.yaml") if p.parent.name != "methods") + sorted(CONFIGS.glob("own_data/*/auto_gamma.yaml"))


def test_every_dataset_folder_has_the_recommended_auto_gamma():
    folders = {p.parent for p in [*CONFIGS.glob("*/base.yaml"), *CONFIGS.glob("own_data/*/base.yaml")]}
    assert folders and folders == {p.parent for p in AUTO_GAMMA}


@pytest.mark.parametrize("path", AUTO_GAMMA, ids=lambda p: str(p.parent.relative_to(CONFIGS)))
def test_auto_gamma_configs_load_on_their_dataset_base(path):
    methods = "../../methods" if path.parent.parent.name == "own_data" else "../methods"
    assert path.read_text().splitlines()[0] == f"base: [base.yaml, {methods}/auto_gamma.yaml]"
    cfg = load_config(path)
    base = load_config(path.parent / "base.yaml")
    assert (cfg.learner, cfg.loss.name, cfg.auto.first_step, cfg.auto.sample) == ("auto", "focal", 1.0, 2048)
    assert (cfg.data.name, cfg.model.name, cfg.schedule.epochs) == (base.data.name, base.model.name,
                                                                    base.schedule.epochs)


def test_every_dataset_has_every_method_on_a_shared_base():
    """A dataset × method pair is its base.yaml under configs/methods/<m>.yaml, from a file or composed."""
    from metacal.train.config import composed_bases, config_exists

    for path in shipped_configs():
        assert config_exists(path), path
        if path.parent.name in DATASETS:
            if path.is_file():
                assert path.read_text().splitlines()[0] == f"base: [base.yaml, ../methods/{path.stem}.yaml]", path
            else:
                assert composed_bases(path) == [path.parent / "base.yaml", CONFIGS / "methods" / path.name]


def test_a_missing_method_file_is_composed_exactly_as_its_stub(tmp_path):
    """configs/<d>/<m>.yaml without a file = a file holding ``base: [base.yaml, ../methods/<m>.yaml]``, down to
    the method name recorded in run.method; a name that is neither is one line with the closest methods."""
    (tmp_path / "methods").mkdir()
    (tmp_path / "d").mkdir()
    (tmp_path / "methods" / "focal3.yaml").write_text("loss: {name: focal, params: {gamma: 3.0}}\n")
    (tmp_path / "d" / "base.yaml").write_text("data: {name: mnist1d}\nmodel: {name: mlp}\noptim: {lr: 0.05}\n")
    composed = load_config(tmp_path / "d" / "focal3.yaml")
    (tmp_path / "d" / "focal3.yaml").write_text("base: [base.yaml, ../methods/focal3.yaml]\n")
    assert to_yaml(composed) == to_yaml(load_config(tmp_path / "d" / "focal3.yaml"))
    assert (composed.loss.params, composed.optim.lr, composed.run.method) == ({"gamma": 3.0}, 0.05, "focal3")
    with pytest.raises(ConfigError, match=r"not found: .*focal4.yaml; unknown method 'focal4'; did you mean focal3"):
        load_config(tmp_path / "d" / "focal4.yaml")
    (tmp_path / "e").mkdir()  # no base.yaml: nothing is composed
    with pytest.raises(ConfigError, match=r"^config file not found: \S*focal3.yaml$"):
        load_config(tmp_path / "e" / "focal3.yaml")


def test_at_most_forty_one_line_stub_configs_remain():
    """Files that only join a base to a method are kept where a user opens them (ce, auto_gamma, own data)."""
    stubs = [p for p in CONFIGS.rglob("*.yaml")
             if [line for line in p.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]
             == [f"base: [base.yaml, {'../../' if p.parent.parent.name == 'own_data' else '../'}methods/{p.name}]"]]
    assert 0 < len(stubs) <= 40
    assert {p.stem for p in stubs} <= {"ce", "auto_gamma", "flgamma_sece"}


def test_meta_lr_of_every_shipped_config_is_the_schema_default():
    """A user who writes a config without meta.lr gets what every shipped config uses (the methods that
    differ set their own in configs/methods/: the trajectory level; the automatic γ has its own first step,
    auto.first_step)."""
    from metacal.meta import MetaLearner, MetaSettings
    import inspect

    default = MetaSettings().lr
    assert default == 1e-4 and inspect.signature(MetaLearner).parameters["meta_lr"].default == default
    from metacal.train.config import method_names

    folders = [p.parent for p in [*CONFIGS.glob("*/base.yaml"), *CONFIGS.glob("own_data/*/base.yaml")]]
    paths = [folder / f"{m}.yaml" for folder in sorted(folders) for m in method_names(folder)] + [
        CONFIGS / "quickstart.yaml", CONFIGS / "quickstart_flgamma_sece.yaml"]
    checked = 0
    for path in paths:
        cfg = load_config(path)
        if "trajectory" in path.stem:
            assert cfg.meta.lr == 1e-3, path
        elif cfg.learner == "auto":  # its own section: the first step of the scalar
            assert cfg.auto.first_step == (0.05 if cfg.loss.name == "label_smoothing" else 1.0), path
        elif cfg.learner is not None:
            assert cfg.meta.lr == default, path
            checked += 1
    assert checked >= 20


@pytest.mark.parametrize("path", shipped_configs(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_shipped_configs_load_and_name_registered_components(path):
    from metacal import data, losses, objectives
    from metacal.losses import LOSSES

    cfg = load_config(path)
    assert cfg.data.name in data.available()
    if cfg.loss.name not in losses.available():
        pytest.skip(f"loss {cfg.loss.name!r} is not registered in metacal.losses yet")
    assert cfg.loss.name in LOSSES
    if cfg.learner in ("gamma_net", "loss"):
        assert cfg.meta.objective in objectives.available()
        assert cfg.learner == ("loss" if cfg.loss.name == "ce_learnable_l2" else "gamma_net")
    if path.parent.name in ("cifar10", "cifar100", "tiny_imagenet"):
        assert (cfg.schedule.epochs, cfg.schedule.milestones, cfg.model.name) == (350, [150, 250], "resnet18")


def test_the_method_is_named_by_the_config_file_unless_the_config_names_it(tmp_path):
    focal = write(tmp_path / "configs" / "my_focal.yaml", "data: {name: mnist1d}\nmodel: {name: mlp}\n"
                  "loss: {name: focal, params: {gamma: 2.5}}\n")
    assert load_config(focal).run.method == "my_focal"
    assert load_config(focal, ["run.method=focal_25"]).run.method == "focal_25"
    saved = write(tmp_path / "run" / "config.yaml", to_yaml(load_config(focal)))
    assert load_config(saved).run.method == "my_focal"  # a saved run keeps its name, not "config"
    assert load_config(None, ["data.name=mnist1d", "model.name=mlp"]).run.method is None


@pytest.mark.parametrize("override, message", [
    ("run.seed=-1", "run.seed must be a seed in [0, 2**32 - 1]; got -1"),
    ("run.seed=4294967296", "run.seed must be a seed in [0, 2**32 - 1]; got 4294967296"),
    ("data.seed=-2", "data.seed must be a seed in [0, 2**32 - 1]; got -2"),
    ("data.batch_size=0", "data.batch_size must be > 0; got 0"),
    ("meta.batch_size=-4", "meta.batch_size must be > 0; got -4"),
    ("data.num_workers=-1", "data.num_workers must be >= 0 (0: batches made in the training process); got -1"),
    ("eval.num_bins=0", "eval.num_bins must be > 0; got 0"),
    ("logging.reliability_every=-1", "logging.reliability_every must be >= 0 (0: never); got -1"),
    ("run.torch_threads=0", "run.torch_threads must be > 0, or null (torch's default); got 0"),
    ("run.max_steps_per_epoch=0", "run.max_steps_per_epoch must be > 0, or null (the whole epoch); got 0"),
    ("run.checkpoint_every_steps=-1", "run.checkpoint_every_steps must be >= 0 (0: only at epoch ends); got -1"),
    ("schedule.epochs=0", "schedule.epochs must be > 0; got 0"),
    ("schedule.lr_decay=-0.1", "schedule.lr_decay must be a finite number > 0 (the lr's factor at each milestone); "
                               "got -0.1"),
    ("schedule.lr_decay=.inf", "schedule.lr_decay must be a finite number > 0 (the lr's factor at each milestone); "
                               "got inf"),
    ("meta.lr=-1e-4", "meta.lr must be a finite number >= 0; got -0.0001"),
    ("meta.lr=.nan", "meta.lr must be a finite number >= 0; got nan"),
    ("meta.lr=.inf", "meta.lr must be a finite number >= 0; got inf"),  # trained, then stopped on a NaN γ
    ("meta.weight_decay=-1", "meta.weight_decay must be a finite number >= 0; got -1.0"),
    ("meta.shape_lr_scale=.inf", "meta.shape_lr_scale must be a finite number >= 0 (0 freezes the γ-Net's shape); "
                                 "got inf"),
    ("meta.ce_weight=-0.5", "meta.ce_weight must be a finite number >= 0 (0: the calibration objective alone); "
                            "got -0.5"),
])
def test_numbers_outside_their_range_are_one_line_naming_the_key(tmp_path, override, message):
    """Each of these was a library's traceback mid-setup (numpy's seed, the DataLoader, torch.set_num_threads,
    Adam), a silent misuse (a negative lr factor) or a run that trained nothing (a step cap of 0)."""
    path = write(tmp_path / "c.yaml", "data: {name: mnist1d}\nmodel: {name: mlp}\nlearner: gamma_net\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, [override])
    assert str(info.value) == message


def test_every_range_has_a_key_of_the_schema_and_the_edges_pass(tmp_path):
    """The table names real keys, and the edge values of the ranges load (0 where >= 0, the largest seed)."""
    from metacal.train.value_ranges import RANGES, SEED_MAX

    path = write(tmp_path / "c.yaml", "data: {name: mnist1d}\nmodel: {name: mlp}\nlearner: gamma_net\n")
    cfg = load_config(path, [f"run.seed={SEED_MAX}", "data.seed=0", "data.num_workers=0", "meta.lr=0",
                             "meta.ce_weight=0", "logging.reliability_every=0", "run.torch_threads=1",
                             "run.max_steps_per_epoch=1", "eval.num_bins=1"])
    assert cfg.run.seed == SEED_MAX and cfg.meta.lr == 0.0
    for key, _, _ in RANGES:
        section, name = key.split(".")
        assert hasattr(getattr(cfg, section), name), key
