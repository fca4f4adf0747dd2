"""The S3 client's data loader: S3's model found without walking every service botocore ships."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pail.errors import ConfigurationError
from pail.store.client import _s3_loader, build_client


def test_given_a_client_when_built_then_its_loader_knows_s3_without_listing_every_service() -> None:
    import botocore.session

    loader = _s3_loader(botocore.session.Session())

    assert loader.list_available_services("service-2") == ["s3"]
    assert loader.list_available_services("endpoint-rule-set-1") == ["s3"]
    client = build_client(region="us-east-1", access_key_id="a", secret_access_key="b")
    url = client.generate_presigned_url("get_object", Params={"Bucket": "jobs", "Key": "done/x"})
    assert url.startswith("https://jobs.s3.amazonaws.com/done/x?")


def test_given_a_data_path_without_s3_when_building_then_botocore_s_own_model_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "other" / "2020-01-01").mkdir(parents=True)
    (tmp_path / "other" / "2020-01-01" / "service-2.json").write_text(json.dumps({}))
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))

    client = build_client(region="eu-west-1", access_key_id="a", secret_access_key="b")

    assert client.meta.region_name == "eu-west-1"
    assert client.meta.service_model.service_name == "s3"


def test_given_an_unknown_profile_when_building_then_a_configuration_error_names_it() -> None:
    with pytest.raises(ConfigurationError, match="no-such-profile-xyz"):
        build_client(profile="no-such-profile-xyz")


def test_given_two_sessions_when_loading_then_they_share_one_loader_per_search_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import botocore.session

    monkeypatch.delenv("AWS_DATA_PATH", raising=False)
    first = _s3_loader(botocore.session.Session())
    second = _s3_loader(botocore.session.Session())
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))
    elsewhere = _s3_loader(botocore.session.Session())

    assert first is second
    assert elsewhere is not first
    assert str(tmp_path) in elsewhere.search_paths


def test_given_two_clients_when_built_then_the_second_reuses_the_parsed_s3_model() -> None:
    one = build_client(region="us-east-1", access_key_id="a", secret_access_key="b")
    two = build_client(region="eu-west-1", access_key_id="a", secret_access_key="b")

    # The same parsed model object: the second client did not read or parse it again.
    assert one.meta.service_model.metadata is two.meta.service_model.metadata
    assert two.meta.region_name == "eu-west-1"
