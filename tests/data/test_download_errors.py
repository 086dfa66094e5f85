"""A failed ``download=True`` names the dataset, the URL and the reason in one line (never a bare URLError),
from the builder and from the trainer's command line."""

from __future__ import annotations

import pickle
import socket
import urllib.error

import pytest
import torchvision.datasets as tvd

from metacal import data
from metacal.data import DownloadError

NO_DNS = urllib.error.URLError(socket.gaierror(-3, "Temporary failure in name resolution"))


class OfflineFashionMNIST:
    """torchvision's FashionMNIST when the network is down (the URLError its downloader raises)."""

    mirrors = ["http://fashion-mnist.example/"]

    def __init__(self, root, train=True, download=False):
        raise NO_DNS


def test_fashion_mnist_download_failure_names_url_and_reason(tmp_path, monkeypatch):
    monkeypatch.setattr(tvd, "FashionMNIST", OfflineFashionMNIST)
    with pytest.raises(DownloadError) as err:
        data.build("fashion_mnist", root=tmp_path / "d", download=True)
    message = str(err.value)
    assert message.startswith(f"could not download fashion_mnist from http://fashion-mnist.example/ into "
                              f"{tmp_path / 'd'}: [Errno -3] Temporary failure in name resolution; ")
    assert "data.root" in message and "$METACAL_DATA" in message and "\n" not in message
    assert isinstance(err.value, FileNotFoundError)  # the trainer reports it as bad input (exit 2)
    again = pickle.loads(pickle.dumps(err.value))
    assert str(again) == message


@pytest.mark.parametrize("error, reason", [
    (urllib.error.HTTPError("https://x", 503, "Service Unavailable", {}, None), "HTTP 503 Service Unavailable"),
    (RuntimeError("Error downloading a.gz:\nTried http://m/, got:\n<urlopen error timed out>\n"),
     "<urlopen error timed out>"),
    (TimeoutError(110, "Connection timed out"), "Connection timed out"),
])  # fmt: skip
def test_cifar_download_failure_reasons(error, reason, tmp_path, monkeypatch):
    class Failing:
        url = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"

        def __init__(self, *args, **kwargs):
            raise error

    monkeypatch.setattr(tvd, "CIFAR10", Failing)
    with pytest.raises(DownloadError, match=f"from {Failing.url} into .*: {reason};"):
        data.build("cifar10", root=tmp_path, download=True)


def test_trainer_cli_reports_the_failed_download_in_one_line(tmp_path, monkeypatch, capsys):
    from metacal.train.cli import main

    monkeypatch.setattr(tvd, "FashionMNIST", OfflineFashionMNIST)
    config = tmp_path / "c.yaml"
    config.write_text("data: {name: fashion_mnist}\nmodel: {name: mlp}\n")
    code = main(["--config", str(config), "--run-dir", str(tmp_path / "run"), "--set", "data.options.download=true",
                 "--set", f"data.root={tmp_path / 'data'}"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("error: could not download fashion_mnist from http://fashion-mnist.example/")
    assert "Temporary failure in name resolution" in err and not (tmp_path / "run").exists()
