"""Checking an AWS Signature Version 4 the way AWS does: recompute it and compare.

The signature is recomputed with botocore's own `SigV4Auth` (the code every AWS SDK for Python
signs with) over the request as it arrived: its method, its path and query exactly as sent on
the wire (percent-encoded: SigV4 encodes the path once more, so a decoded path would sign
differently), the headers its ``Authorization`` names in ``SignedHeaders``, its body, and its
own ``X-Amz-Date``. Only the credential pair of `simulator.cloud_credentials` is known.

`verify` answers a `Verified` (who signed, for which region) or raises `SigV4Error` carrying
the ``x-amzn-ErrorType`` name AWS would answer with (all with HTTP 403).
"""

import datetime
import hashlib
import hmac
import re
from collections.abc import Mapping

import msgspec
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from simulator.cloud_credentials import AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN

ALGORITHM = "AWS4-HMAC-SHA256"
SERVICE = "bedrock"
MAX_SKEW = datetime.timedelta(minutes=5)
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
# A session token the simulator treats as expired (ExpiredTokenException), so that a client's
# credential refresh can be tested; any other token but AWS_SESSION_TOKEN is unrecognized.
EXPIRED_SESSION_TOKEN = "sim-expired-session-token"
AMZ_DATE_FORMAT = "%Y%m%dT%H%M%SZ"
MISMATCH = ("The request signature we calculated does not match the signature you provided. "
            "Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
_AUTHORIZATION = re.compile(
    ALGORITHM + r"\s+Credential=(?P<credential>[^,\s]+),\s*SignedHeaders=(?P<signed>[^,\s]+),"
    r"\s*Signature=(?P<signature>[0-9a-f]+)\s*$")


class SigV4Error(Exception):
    """A signature AWS would refuse: `error_type` is its ``x-amzn-ErrorType`` name."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message


class Verified(msgspec.Struct, frozen=True):
    """A valid signature: its access key, the region and service of its credential scope, and
    whether a session token came with it."""

    access_key_id: str
    region: str
    service: str
    session_token: bool


class Scope(msgspec.Struct, frozen=True):
    access_key_id: str
    date: str
    region: str
    service: str
    signed_headers: list[str]
    signature: str


def is_sigv4(authorization: str) -> bool:
    """True when an ``Authorization`` header value claims a SigV4 signature."""
    return authorization.startswith(ALGORITHM)


def parse_authorization(authorization: str) -> Scope:
    """The parts of ``AWS4-HMAC-SHA256 Credential=AK/DATE/REGION/SERVICE/aws4_request,
    SignedHeaders=a;b, Signature=HEX``; raises SigV4Error (IncompleteSignatureException)."""
    match = _AUTHORIZATION.match(authorization)
    parts = match["credential"].split("/") if match else []
    if match is None or len(parts) != 5 or parts[4] != "aws4_request":
        raise SigV4Error("IncompleteSignatureException",
                         "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters.")
    return Scope(parts[0], parts[1], parts[2], parts[3], match["signed"].split(";"), match["signature"])


def verify(method: str, url: str, headers: Mapping[str, str], body: bytes,
           now: datetime.datetime | None = None) -> Verified:
    """Check the SigV4 signature of a request; `url` is scheme, host and the path and query
    exactly as sent (raw). Raises SigV4Error with AWS's error name when AWS would refuse it."""
    lowered = {name.lower(): value for name, value in headers.items()}  # HTTP names are case-blind
    scope = parse_authorization(lowered.get("authorization", ""))
    token = _check_credentials(scope, lowered)
    amz_date = lowered.get("x-amz-date", "")
    _check_date(amz_date, scope, now or datetime.datetime.now(datetime.UTC))
    _check_payload_hash(lowered, body)
    expected = signature(method, url, lowered, body, scope, amz_date, token)
    if not hmac.compare_digest(expected, scope.signature):
        raise SigV4Error("InvalidSignatureException", MISMATCH)
    return Verified(scope.access_key_id, scope.region, scope.service, token is not None)


def _check_credentials(scope: Scope, headers: dict[str, str]) -> str | None:
    """The session token sent (None: the key pair alone), after checking key, service and token."""
    if scope.access_key_id != AWS_ACCESS_KEY_ID:
        raise SigV4Error("UnrecognizedClientException", "The security token included in the request is invalid.")
    if scope.service != SERVICE:
        raise SigV4Error("InvalidSignatureException",
                         f"Credential should be scoped to correct service: '{SERVICE}'.")
    token = headers.get("x-amz-security-token")
    if token == EXPIRED_SESSION_TOKEN:
        raise SigV4Error("ExpiredTokenException", "The security token included in the request is expired")
    if token is not None and not hmac.compare_digest(token, AWS_SESSION_TOKEN):
        raise SigV4Error("UnrecognizedClientException", "The security token included in the request is invalid.")
    return token


def _check_date(amz_date: str, scope: Scope, now: datetime.datetime) -> None:
    """``X-Amz-Date`` present, of the scope's day, and within MAX_SKEW of `now`."""
    try:
        signed_at = datetime.datetime.strptime(amz_date, AMZ_DATE_FORMAT).replace(tzinfo=datetime.UTC)
    except ValueError:
        raise SigV4Error("IncompleteSignatureException", "Authorization header requires existence of "
                         "either a 'X-Amz-Date' or a 'Date' header.") from None
    if amz_date[:8] != scope.date:
        raise SigV4Error("InvalidSignatureException", "Date in Credential scope does not match YYYYMMDD from ISO-8601 "
                         "version of date from HTTP")
    if abs(now - signed_at) > MAX_SKEW:
        # AWS answers a stale signature with InvalidSignatureException "Signature expired"; an
        # expired session token (EXPIRED_SESSION_TOKEN here) with ExpiredTokenException.
        raise SigV4Error("InvalidSignatureException", f"Signature expired: {amz_date} is now earlier than "
                         f"{(now - MAX_SKEW).strftime(AMZ_DATE_FORMAT)}.")


def _check_payload_hash(headers: dict[str, str], body: bytes) -> None:
    claimed = headers.get("x-amz-content-sha256")
    if claimed is not None and claimed != UNSIGNED_PAYLOAD and claimed != hashlib.sha256(body).hexdigest():
        raise SigV4Error("InvalidSignatureException",
                         "The provided 'x-amz-content-sha256' header does not match what was computed.")


def signature(method: str, url: str, headers: dict[str, str], body: bytes, scope: Scope,
              amz_date: str, token: str | None) -> str:
    """The hex signature botocore computes for this request with the known secret (`headers`
    lower-cased; a signed ``host`` that is absent is taken from `url`, as botocore does)."""
    signed = {name: headers.get(name, "") for name in scope.signed_headers if name != "host" or name in headers}
    request = AWSRequest(method=method, url=url, headers=signed, data=body)
    request.context["timestamp"] = amz_date
    signer = SigV4Auth(Credentials(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, token), scope.service, scope.region)
    canonical = signer.canonical_request(request)
    return str(signer.signature(signer.string_to_sign(request, canonical), request))
