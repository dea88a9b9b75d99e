"""Bedrock's credentials at the simulator: a SigV4 signature recomputed with botocore, or a bearer
API key; refusals named as AWS names them; and the record of which one each request used."""

import datetime

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from yarl import URL

from simulator import cloud_credentials as creds
from simulator import sigv4
from tests.simulator.test_bedrock_support import BEARER, SONNET, auth_log, bedrock, call, sim_url, user
from tests.support import sim_records

BODY = b'{"messages": [{"role": "user", "content": [{"text": "hi"}]}]}'


def signed_headers(url: str, body: bytes, *, region: str = "us-east-1", token: str | None = None) -> dict[str, str]:
    """The headers botocore signs a POST of `body` to `url` with (as its client would)."""
    request = AWSRequest(method="POST", url=url, data=body, headers={"Content-Type": "application/json"})
    credentials = Credentials(creds.AWS_ACCESS_KEY_ID, creds.AWS_SECRET_ACCESS_KEY, token)
    SigV4Auth(credentials, "bedrock", region).add_auth(request)
    return dict(request.headers.items())


async def post(client, url: str, body: bytes, headers: dict[str, str]):
    """POST to an absolute `url` sent exactly as written: yarl would otherwise decode ``%3A``,
    and the path on the wire would no longer be the path that was signed."""
    return await client.session.post(URL(url, encoded=True), data=body, headers=headers)


async def refusal(client, **options) -> dict:
    with pytest.raises(ClientError) as raised:
        await call(bedrock(sim_url(client), **options).converse, modelId=SONNET, messages=user("hi"))
    return raised.value.response


@pytest.mark.parametrize(("region", "token"), [("us-east-1", creds.AWS_SESSION_TOKEN), ("eu-west-3", None)])
async def test_a_signed_request_is_served_and_its_region_recorded(make_client, region, token):
    client = await make_client()
    client_of_region = bedrock(sim_url(client), region=region, token=token)
    answer = await call(client_of_region.converse, modelId=SONNET, messages=user("hi"))
    assert answer["stopReason"] == "end_turn"
    log, = await auth_log(client)
    assert log == {"seq": 1, "operation": "Converse", "model_id": SONNET, "auth": "sigv4", "region": region,
                   "access_key_id": creds.AWS_ACCESS_KEY_ID, "session_token": token is not None}
    record, = await sim_records(client)
    assert record["headers"]["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")


async def test_a_bearer_api_key_is_accepted(make_client):
    client = await make_client()
    response = await client.post(f"/model/{SONNET}/converse", data=BODY, headers=BEARER)
    assert response.status == 200
    log, = await auth_log(client)
    assert log["auth"] == "bearer" and log["region"] is None


async def test_a_wrong_secret_is_an_invalid_signature(make_client):
    response = await refusal(await make_client(), secret="not-the-secret")
    assert response["Error"]["Code"] == "InvalidSignatureException"
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert response["Error"]["Message"].startswith("The request signature we calculated does not match")


@pytest.mark.parametrize(("options", "code"), [
    ({"key": "AKIDUNKNOWN"}, "UnrecognizedClientException"),
    ({"token": "stolen-token"}, "UnrecognizedClientException"),
    ({"token": sigv4.EXPIRED_SESSION_TOKEN}, "ExpiredTokenException"),
])
async def test_unknown_or_expired_credentials_are_refused(make_client, options, code):
    client = await make_client()
    response = await refusal(client, **options)
    assert response["Error"]["Code"] == code and response["ResponseMetadata"]["HTTPStatusCode"] == 403
    log, = await auth_log(client)
    assert log["auth"] == "none"
    assert [r["outcome"] for r in await sim_records(client)] == ["error"]


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer "}, {"Authorization": "Basic abc"}])
async def test_no_credentials_is_a_missing_token(make_client, headers):
    client = await make_client()
    response = await client.post(f"/model/{SONNET}/converse", data=BODY, headers=headers)
    assert response.status == 403
    assert response.headers["x-amzn-ErrorType"].startswith("MissingAuthenticationTokenException:")
    assert (await response.json()) == {"message": "Missing Authentication Token"}


async def test_a_body_changed_after_signing_is_refused(make_client):
    client = await make_client()
    url = f"{sim_url(client)}/model/{SONNET.replace(':', '%3A')}/converse"
    headers = signed_headers(url, BODY, token=creds.AWS_SESSION_TOKEN)
    good = await post(client, url, BODY, headers)
    assert good.status == 200
    tampered = await post(client, url, BODY.replace(b"hi", b"yo"), headers)
    assert tampered.status == 403 and tampered.headers["x-amzn-ErrorType"].startswith("InvalidSignatureException:")


async def test_the_signature_covers_the_path_as_sent(make_client):
    client = await make_client()
    encoded = f"{sim_url(client)}/model/{SONNET.replace(':', '%3A')}/converse"
    headers = signed_headers(encoded, BODY)
    # The same model id sent unencoded routes the same, but is not the path that was signed.
    other = await post(client, f"{sim_url(client)}/model/{SONNET}/converse", BODY, headers)
    assert other.status == 403


async def test_a_payload_hash_header_must_match(make_client):
    client = await make_client()
    url = f"{sim_url(client)}/model/{SONNET}/invoke"
    headers = {**signed_headers(url, BODY), "X-Amz-Content-SHA256": "0" * 64}
    response = await post(client, url, BODY, headers)
    assert response.status == 403 and response.headers["x-amzn-ErrorType"].startswith("InvalidSignatureException:")


def test_a_stale_or_malformed_signature_is_refused():
    url = "http://127.0.0.1:1/model/x/converse"
    headers = signed_headers(url, BODY)
    now = datetime.datetime.strptime(headers["X-Amz-Date"], sigv4.AMZ_DATE_FORMAT).replace(tzinfo=datetime.UTC)
    assert sigv4.verify("POST", url, headers, BODY, now + datetime.timedelta(minutes=4)).region == "us-east-1"
    with pytest.raises(sigv4.SigV4Error, match="Signature expired") as stale:
        sigv4.verify("POST", url, headers, BODY, now + datetime.timedelta(minutes=6))
    assert stale.value.error_type == "InvalidSignatureException"
    with pytest.raises(sigv4.SigV4Error) as partial:
        sigv4.verify("POST", url, {**headers, "Authorization": "AWS4-HMAC-SHA256 Credential=x"}, BODY, now)
    assert partial.value.error_type == "IncompleteSignatureException"
    other_service = headers["Authorization"].replace("/bedrock/", "/s3/")
    with pytest.raises(sigv4.SigV4Error, match="scoped to correct service"):
        sigv4.verify("POST", url, {**headers, "Authorization": other_service}, BODY, now)
