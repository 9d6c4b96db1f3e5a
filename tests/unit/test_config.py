"""config: S3Config's checks, its secret-free repr, pipeline options, and the client it makes."""

from __future__ import annotations

import pickle

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beam_s3_sink.config import MIN_PART_SIZE, S3Config, resolve_config
from beam_s3_sink.object_settings import ObjectSettings

SECRET, TOKEN = "wJalrXUtnFEMI/K7MDENG", "FwoGZXIvYXdzEJr"


def test_repr_and_str_never_show_a_secret():
    cfg = S3Config(access_key_id="AKIAEXAMPLE", secret_access_key=SECRET, session_token=TOKEN)
    for text in (repr(cfg), str(cfg), f"{cfg}"):
        assert SECRET not in text and TOKEN not in text and "AKIAEXAMPLE" in text and "***" in text
    assert repr(S3Config()) == "S3Config()"


def test_is_a_frozen_picklable_hashable_value():
    cfg = S3Config(endpoint_url="http://h:1", objects=ObjectSettings(storage_class="STANDARD_IA"))
    assert pickle.loads(pickle.dumps(cfg)) == cfg and hash(cfg) == hash(
        S3Config(endpoint_url="http://h:1", objects=ObjectSettings(storage_class="STANDARD_IA"))
    )
    with pytest.raises(AttributeError):
        cfg.endpoint_url = "x"  # type: ignore[misc]
    assert cfg.replace(max_concurrency=8).max_concurrency == 8 and cfg.max_concurrency == 4


@pytest.mark.parametrize(
    "kwargs, says",
    [
        (dict(retry_mode="fast"), "retry_mode"),
        (dict(max_attempts=0), "max_attempts"),
        (dict(part_size=MIN_PART_SIZE - 1), "part_size must be from 5 MiB"),
        (dict(max_concurrency=65), "max_concurrency"),
        (dict(access_key_id="a"), "together"),
        (dict(secret_access_key="s"), "together"),
        (dict(session_token="t"), "session_token needs"),
        (dict(access_key_id="a", secret_access_key="s", profile_name="p"), "not both"),
        (dict(external_id="x"), "external_id needs role_arn"),
        (dict(role_arn="arn:aws:iam::1:role/r", role_duration_seconds=60), "role_duration_seconds"),
        (dict(objects={"storage_class": "X"}), "objects must be an ObjectSettings"),
    ],
)
def test_invalid_settings(kwargs, says):
    with pytest.raises((ValueError, TypeError), match=says):
        S3Config(**kwargs)


def test_from_pipeline_options():
    options = PipelineOptions(
        [
            "--s3_endpoint_url=https://minio:9000",
            "--s3_region_name=eu-west-1",
            "--s3_access_key_id=AK",
            "--s3_secret_access_key=SK",
            "--s3_verify=false",
            "--s3_disable_ssl",
        ]
    )
    cfg = S3Config.from_pipeline_options(options)
    assert (cfg.endpoint_url, cfg.region_name, cfg.access_key_id, cfg.secret_access_key) == (
        "http://minio:9000",
        "eu-west-1",
        "AK",
        "SK",
    )
    assert cfg.path_style is True and cfg.verify is False
    assert S3Config.from_pipeline_options(PipelineOptions(["--s3_verify=/ca.pem"])).verify == "/ca.pem"
    assert S3Config.from_pipeline_options(PipelineOptions([])) == S3Config()


def test_resolve_config_takes_the_explicit_one_whole():
    options = PipelineOptions(["--s3_endpoint_url=http://options:9000", "--s3_region_name=eu-west-1"])
    explicit = S3Config(endpoint_url="http://explicit:9000")
    assert resolve_config(explicit, options) is explicit  # not merged field by field
    assert resolve_config(None, options).region_name == "eu-west-1"


def test_client_kwargs():
    kwargs = S3Config(
        endpoint_url="http://h:1",
        region_name="r",
        path_style=True,
        max_attempts=3,
        max_concurrency=16,
        verify="/ca.pem",
    ).client_kwargs()
    config = kwargs["config"]
    assert (kwargs["endpoint_url"], kwargs["region_name"], kwargs["verify"]) == ("http://h:1", "r", "/ca.pem")
    assert config.retries == {"mode": "standard", "max_attempts": 3}
    assert config.s3 == {"addressing_style": "path"} and config.max_pool_connections == 34
    assert "endpoint_url" not in S3Config().client_kwargs()


def test_make_client_makes_no_request():
    cfg = S3Config(
        endpoint_url="http://127.0.0.1:9",
        region_name="us-east-1",
        access_key_id="AK",
        secret_access_key=SECRET,
        objects=ObjectSettings(expected_bucket_owner="111122223333"),
    )
    client = cfg.make_client()
    assert client.meta.endpoint_url == "http://127.0.0.1:9" and client.meta.region_name == "us-east-1"
    assert client._request_signer._credentials.secret_key == SECRET


def test_assume_role_session_without_source_credentials(monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(ValueError, match="no credentials to assume arn:aws:iam::111122223333:role/r"):
        S3Config(role_arn="arn:aws:iam::111122223333:role/r").make_session()


def test_assume_role_credentials_are_deferred():
    session = S3Config(
        access_key_id="AK", secret_access_key=SECRET, role_arn="arn:aws:iam::111122223333:role/r", external_id="x"
    ).make_session()
    credentials = session.get_credentials()  # no STS call yet: refreshed when first used
    assert credentials.method == "assume-role"
