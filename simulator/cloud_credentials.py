"""The test credentials every simulated cloud knows: what the gateway's tests, the demo and the
simulator share so that signatures and tokens can be checked for real. None of them is a real
secret: they open nothing but this simulator (the AWS pair is AWS's own documentation example).

- AWS: an access key pair and a session token; the simulator recomputes each request's SigV4
  signature with botocore from these. A Bedrock API key (bearer) is any `BEDROCK_API_KEY`.
- Google: a service account whose JWT assertions the simulator's token endpoint verifies with
  the public half of `SERVICE_ACCOUNT_PRIVATE_KEY`; `service_account_info(token_uri)` is the
  JSON file google-auth reads (`GOOGLE_APPLICATION_CREDENTIALS`).
- Azure: an `api-key`, and an Entra ID tenant with one client (id and secret).
"""

AWS_ACCESS_KEY_ID = "AKIDEXAMPLE"
AWS_SECRET_ACCESS_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
AWS_SESSION_TOKEN = "sim-session-token-0123456789abcdef"
BEDROCK_API_KEY = "ABSKsim-bedrock-api-key-0123456789"

GOOGLE_PROJECT = "sim-project"
SERVICE_ACCOUNT_EMAIL = "gateway@sim-project.iam.gserviceaccount.com"
SERVICE_ACCOUNT_KEY_ID = "sim-key-1"
SERVICE_ACCOUNT_PRIVATE_KEY = """-----BEGIN PRIVATE KEY-----
MIIEvAIBADANBgkqhkiG9w0BAQEFAASCBKYwggSiAgEAAoIBAQD8sTLVedtn3gLI
wCF48wdHlVkkGke0BWI4E9iYkIYof7X/3LG3poR6xCt2O2KnRvYkwcxlbNNP2OB8
N2WKN3EWTVWxvPF93AG1eIuy8GUn9ChqJ36dgexP3Nq4qqifpChPC2FiiHFaeADa
DL7bNKS+YFirdd6M3DMxjvIBuff9pZ0C0FMQVurfdA5swhkyaz0XuoRbHDE9lvvh
UjY+/kVWvcIbFshOCGy4ootEBOxNH21JKZ0AtWxUDU29ISZJzX+kmISkhSg/h/Lm
wg/kVfn01qc7GfYqX7a+PmozgwF9bXLOVyWkM0w92z7jo1+1CDy4AKsEmXecyxVg
fZ0nGxO1AgMBAAECggEAerPS8t1ewJOKN5AwUMp2NPjdFc5bFhvtIzzj1sWLF7xY
FJvGgl6uAu0iC6HvmDm5iYS/q1qKS8IM09SUjma4l7NK0ulkPJDqFYQpFeVswVdq
jo2KCpLNvMQKQ1S/V/G/Dw8AJXgKzvrpsvgwb0IjYzxmoi+0tyKwCzcV5ee3d6cO
UhlrM5mFfxhwCKsIK6FMOAn0RiCojbvVQps4SshWbHNQ9+pyu31YwtNZvHjYpILY
0ELVlvbTnSn56wURinSlb82ZpLq77/gYAoq3EiSdrLQN7JsPhGo4C95WohqTSGjX
hVACWlKHeU2ElkSnD8T6outjcHRPHTRq0NMSEZN5ywKBgQD+X/ib10mHmU231SjW
LFV04Ukbt/LM+g1Krxmel4J5OlXGoSLa3yCs7aC1iUi0pLNPWEy6L53lNR9aQuwQ
5O8FBZbR57+tM8JLv2OyB7KSpxCii2wO5Vnxp4aTu9Av0sRfYj4uWN9Kgov44hSB
Kz2yf7kWehXkh+fMo1FmFnDBnwKBgQD+Tnmy4PXr7UOXLwBQxTIH9irG0v56Pe2F
2X3oU8G5sOlO7DtZJNDko4tr18M+RYJDt2N+X1M4bk11C0aOMjVIWi2/5TQRvEoY
ek3kEC5cAs5iKBFENucb7Ej1S0ekCPrMlyBp63n2NJg9pUuXcVcJHM/ZVnkScq9X
awEhXDayKwKBgHkkZXZ6Wec9CDkzR8ZvyKboH3QW74fU0f2uVComB5oKQQ1ecgYA
W0RfyriJz9lP0qFH8Qp+YNjmqq7Gzjvhez9OARyoHK20x6RhWm5PoiibbZ2rfmO9
sE8YtEupFyWfX6v5Upmp83U9pMF7kb5ORIy8rP3aWJDEdI0Nfld6+moLAoGAYSYB
f8BIshQ1me+uoyxx7HCx7rpz1KcLsfJgEvzMKO/YcPn1whw6YN3JSS1nvMY4+T15
mLE5zXj1xhzEm1W63ST2DTS2K4BOngM69kDoNOYtiXnc/r4qk5Q0WuCjQZrclIO3
Mj9unAuDjSk0M2ps4WJMVK6gGdgN+8s451Ge43kCgYAZsE2mV7HvUq12lgtmepkK
6kbuAAQcTCEa5lniyl8PSTqF3vie1WxswApu5yBPX4qdf7zFH0ILgbSSPbkOSx/n
Qr03I5ILZbHA7nRPrrJQiYuDpwNR/ZoGFhy9qPoY8zb3W/hs9lb86j371+97xxkM
XLtqbUe9BynpGid+/8itbQ==
-----END PRIVATE KEY-----
"""

AZURE_API_KEY = "sim-azure-api-key-0123456789"
AZURE_TENANT_ID = "00000000-0000-4000-8000-00000000a2e0"
AZURE_CLIENT_ID = "00000000-0000-4000-8000-0000000c1e47"
AZURE_CLIENT_SECRET = "sim-entra-client-secret-0123456789"


def service_account_info(token_uri: str) -> dict:
    """The service account file's contents, its tokens fetched from `token_uri` (the simulator's)."""
    return {
        "type": "service_account",
        "project_id": GOOGLE_PROJECT,
        "private_key_id": SERVICE_ACCOUNT_KEY_ID,
        "private_key": SERVICE_ACCOUNT_PRIVATE_KEY,
        "client_email": SERVICE_ACCOUNT_EMAIL,
        "client_id": "100000000000000000001",
        "token_uri": token_uri,
    }


def for_clients(sim_url: str) -> dict:
    """What a client of the simulator at `sim_url` needs to reach its clouds (the demo reads it
    from the readiness line): Azure's api-key and the service account file's contents."""
    return {"azure_api_key": AZURE_API_KEY, "service_account": service_account_info(f"{sim_url}/token")}
