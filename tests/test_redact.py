"""Secret redaction (lexmem.capture.redact): what must go, what must stay, and the guarantees.

Every secret below is FAKE and built at run time from a seeded generator, so this file
holds no string that looks like a live credential (and none trips push protection).
"""

from __future__ import annotations

import base64
import json
import random
import string
import subprocess
import sys
from typing import Any

import pytest

from lexmem.capture.redact import RULES, Finding, Redaction, contains_secret, redact, redact_obj

UPPER_DIGITS = string.ascii_uppercase + string.digits
ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"


def fake(alphabet: str, n: int, seed: int) -> str:
    """A deterministic random string; it always mixes letters and digits when it can."""
    rng = random.Random(seed)
    chars = [rng.choice(alphabet) for _ in range(n)]
    pools = [
        p
        for p in (string.ascii_lowercase, string.ascii_uppercase, string.digits)
        if set(p) & set(alphabet)
    ]
    for i, pool in enumerate(pools):
        if not set(chars) & set(pool):
            chars[(i * 7 + 3) % n] = rng.choice(sorted(set(pool) & set(alphabet)))
    return "".join(chars)


def b64url(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


# --- the fake secrets --------------------------------------------------------------------

AWS_ID = "AK" + "IA" + fake(UPPER_DIGITS, 16, 1)
AWS_STS_ID = "AS" + "IA" + fake(UPPER_DIGITS, 16, 2)
AWS_SECRET = fake(B64, 40, 3)
GCP_KEY = "AI" + "za" + fake(URLSAFE, 35, 4)
PEM_BODY = "\n".join(fake(B64, 64, 10 + i) for i in range(4))
AZURE_KEY = fake(B64, 86, 5) + "=="
SAS_SIG = fake(ALNUM, 20, 6) + "%2B" + fake(ALNUM, 20, 7) + "%3D"
GH = {
    p: p + "_" + fake(ALNUM, 36, 20 + i) for i, p in enumerate(("ghp", "gho", "ghu", "ghs", "ghr"))
}
GH_PAT = "github" + "_pat_" + fake(ALNUM, 22, 8) + "_" + fake(ALNUM, 59, 9)
GITLAB = "gl" + "pat-" + fake(ALNUM, 20, 11)
NPM = "npm" + "_" + fake(ALNUM, 36, 12)
HF = "hf" + "_" + fake(string.ascii_letters + string.digits, 34, 13)
OPENAI = "sk" + "-" + fake(ALNUM, 48, 14)
OPENAI_PROJ = "sk" + "-proj-" + fake(URLSAFE, 120, 15)
ANTHROPIC = "sk" + "-ant-api03-" + fake(URLSAFE, 93, 16) + "AA"
STRIPE_LIVE = "sk" + "_live_" + fake(ALNUM, 24, 17)
STRIPE_RESTRICTED = "rk" + "_live_" + fake(ALNUM, 32, 18)
STRIPE_TEST = "sk" + "_test_" + fake(ALNUM, 40, 19)
SLACK = {
    p: "xo" + p + "-" + fake(string.digits, 12, 30 + i) + "-" + fake(ALNUM, 24, 40 + i)
    for i, p in enumerate(("xb", "xp", "xa", "xr"))
}
SLACK_HOOK_PATH = (
    "T" + fake(UPPER_DIGITS, 8, 50) + "/B" + fake(UPPER_DIGITS, 8, 51) + "/" + fake(ALNUM, 24, 52)
)
SENDGRID = "SG" + "." + fake(URLSAFE, 22, 53) + "." + fake(URLSAFE, 43, 54)
TWILIO_SK = "SK" + fake(HEX, 32, 55)
TWILIO_AUTH = fake(HEX, 32, 56)
JWT = (
    b64url({"alg": "HS256", "typ": "JWT"})
    + "."
    + b64url({"sub": "1234567890", "name": "Test User", "iat": 1516239022})
    + "."
    + fake(URLSAFE, 43, 57)
)
OPAQUE = fake(ALNUM + "._-", 40, 58)
BASIC_PW = "s3cr3t-" + fake(ALNUM, 10, 59)
BASIC = base64.b64encode(f"alice:{BASIC_PW}".encode()).decode()
DISCORD = fake(URLSAFE, 68, 60)
HIGH_ENTROPY = fake(ALNUM + "+/", 32, 61)
MAILGUN = "key" + "-" + fake(string.ascii_lowercase + string.digits, 32, 62)
GOOGLE_SECRET = "GOC" + "SPX-" + fake(URLSAFE, 28, 64)
PYPI = "pypi" + "-AgEIcHlwaS5vcmc" + fake(URLSAFE, 60, 65)


def pem(kind: str, body: str = PEM_BODY) -> str:
    label = f"{kind} PRIVATE KEY".strip()
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"


# --- positives ------------------------------------------------------------------------------
# (kind reported, text, the secret that must not survive)

POSITIVES = [
    # AWS
    ("aws_access_key_id", f"export AWS_ACCESS_KEY_ID={AWS_ID}", AWS_ID),
    ("aws_access_key_id", f"aws_access_key_id = {AWS_ID}\nregion = eu-west-1", AWS_ID),
    (
        "aws_access_key_id",
        f'{{"AccessKeyId": "{AWS_STS_ID}", "Expiration": "2030-01-01"}}',
        AWS_STS_ID,
    ),
    ("aws_access_key_id", f"boto3 error for key {AWS_ID}: AccessDenied", AWS_ID),
    ("aws_secret_access_key", f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET),
    ("aws_secret_access_key", f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET}", AWS_SECRET),
    ("aws_secret_access_key", f'"SecretAccessKey": "{AWS_SECRET}",', AWS_SECRET),
    ("aws_secret_access_key", f"  aws_secret_access_key: '{AWS_SECRET}'", AWS_SECRET),
    # GCP
    ("gcp_api_key", f"https://maps.googleapis.com/maps/api/geocode/json?key={GCP_KEY}", GCP_KEY),
    ("gcp_api_key", f"GOOGLE_API_KEY={GCP_KEY}", GCP_KEY),
    (
        "gcp_service_account",
        json.dumps(
            {
                "type": "service_account",
                "private_key": pem("") + "\n",
                "client_email": "x@p.iam.gserviceaccount.com",
            }
        ),
        PEM_BODY.splitlines()[1],
    ),
    # Azure
    (
        "azure_storage_key",
        f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={AZURE_KEY};EndpointSuffix=core.windows.net",
        AZURE_KEY,
    ),
    (
        "azure_storage_key",
        f"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey={AZURE_KEY}",
        AZURE_KEY,
    ),
    (
        "azure_sas_token",
        f"https://acct.blob.core.windows.net/c/b.txt?sv=2022-11-02&ss=b&sp=r&se=2030-01-01T00:00:00Z&sig={SAS_SIG}",
        SAS_SIG,
    ),
    (
        "azure_sas_token",
        f"BlobEndpoint=https://a.blob.core.windows.net/;SharedAccessSignature=sv=2022-11-02&ss=b&sig={SAS_SIG}",
        SAS_SIG,
    ),
    # GitHub, GitLab, npm, Hugging Face
    *[
        ("github_token", f"git push https://github.com/org/repo # token {tok}", tok)
        for tok in GH.values()
    ],
    ("github_token", f"GITHUB_TOKEN={GH['ghp']}", GH["ghp"]),
    ("github_token", f"gh auth login --with-token <<< {GH['gho']}", GH["gho"]),
    ("github_fine_grained_pat", f"token: {GH_PAT}", GH_PAT),
    ("github_fine_grained_pat", f"use `{GH_PAT}` for the API", GH_PAT),
    ("gitlab_token", f"PRIVATE-TOKEN: {GITLAB}", GITLAB),
    (
        "gitlab_token",
        f'curl --header "PRIVATE-TOKEN: {GITLAB}" https://gitlab.com/api/v4/projects',
        GITLAB,
    ),
    ("npm_token", f"//registry.npmjs.org/:_authToken={NPM}", NPM),
    ("npm_token", f"npm token created: {NPM}", NPM),
    ("huggingface_token", f"huggingface-cli login --token {HF}", HF),
    ("huggingface_token", f"HF_TOKEN={HF}", HF),
    # AI providers
    ("openai_api_key", f"OPENAI_API_KEY={OPENAI}", OPENAI),
    ("openai_api_key", f'client = OpenAI(api_key="{OPENAI_PROJ}")', OPENAI_PROJ),
    ("openai_api_key", f"Incorrect API key provided: {OPENAI}.", OPENAI),
    ("anthropic_api_key", f"export ANTHROPIC_API_KEY={ANTHROPIC}", ANTHROPIC),
    ("anthropic_api_key", f"x-api-key: {ANTHROPIC}", ANTHROPIC),
    # Payments and messaging
    ("stripe_key", f"stripe.api_key = '{STRIPE_LIVE}'", STRIPE_LIVE),
    ("stripe_key", f"STRIPE_RESTRICTED={STRIPE_RESTRICTED}", STRIPE_RESTRICTED),
    ("stripe_key", f"curl https://api.stripe.com/v1/charges -u {STRIPE_TEST}:", STRIPE_TEST),
    *[("slack_token", f"SLACK_BOT_TOKEN={tok}", tok) for tok in SLACK.values()],
    ("slack_token", f"slack.WebClient(token='{SLACK['xb']}')", SLACK["xb"]),
    (
        "slack_webhook",
        f'curl -X POST -d \'{{"text":"hi"}}\' https://hooks.slack.com/services/{SLACK_HOOK_PATH}',
        SLACK_HOOK_PATH,
    ),
    ("discord_webhook", f"https://discord.com/api/webhooks/123456789012345678/{DISCORD}", DISCORD),
    ("sendgrid_api_key", f"SENDGRID_API_KEY={SENDGRID}", SENDGRID),
    ("sendgrid_api_key", f"sg = SendGridAPIClient('{SENDGRID}')", SENDGRID),
    ("twilio_api_key", f"api key sid {TWILIO_SK} created", TWILIO_SK),
    ("twilio_auth_token", f"TWILIO_AUTH_TOKEN={TWILIO_AUTH}", TWILIO_AUTH),
    ("twilio_auth_token", f'twilio_auth_token: "{TWILIO_AUTH}"', TWILIO_AUTH),
    # private keys
    *[
        ("private_key", f"cat key.pem\n{pem(kind)}\n$ ls", PEM_BODY.splitlines()[2])
        for kind in ("RSA", "EC", "OPENSSH", "ENCRYPTED", "DSA", "")
    ],
    (
        "private_key",
        f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{PEM_BODY}\n-----END PGP PRIVATE KEY BLOCK-----",
        PEM_BODY.splitlines()[0],
    ),
    (
        "private_key",
        f"here it is:\n-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}",
        PEM_BODY.splitlines()[3],
    ),
    ("private_key", "key = " + json.dumps(pem("RSA")), PEM_BODY.splitlines()[1][:30]),
    # JWTs and auth headers
    ("jwt", f"the session cookie holds {JWT} for a day", JWT),
    ("jwt", f'{{"id_token": "{JWT}"}}', JWT),
    ("bearer_token", f"Authorization: Bearer {OPAQUE}", OPAQUE),
    (
        "bearer_token",
        f'curl -H "Authorization: Bearer {OPAQUE}" https://api.example.com/v1/me',
        OPAQUE,
    ),
    ("bearer_token", f"headers = {{'Authorization': 'Bearer {OPAQUE}'}}", OPAQUE),
    ("bearer_token", f"send it as Bearer {OPAQUE} in the header", OPAQUE),
    ("jwt", f"Authorization: Bearer {JWT}", JWT),
    ("basic_auth", f"Authorization: Basic {BASIC}", BASIC),
    ("basic_auth", f"the header was Basic {BASIC}", BASIC),
    ("authorization_header", f"Authorization: token {OPAQUE}", OPAQUE),
    ("authorization_header", f'"authorization": "{OPAQUE}"', OPAQUE),
    ("cookie", f"Cookie: sessionid={OPAQUE}; csrftoken={HIGH_ENTROPY[:24]}", OPAQUE),
    ("cookie", f"Set-Cookie: session={OPAQUE}; Path=/; HttpOnly", OPAQUE),
    # credentials in URLs and commands
    ("url_credentials", "postgres://app:Tr0ub4dor&3@db.internal:5432/app", "Tr0ub4dor&3"),
    ("url_credentials", "git clone https://bob:hunter2x@github.com/org/repo.git", "hunter2x"),
    ("url_credentials", "REDIS_URL=redis://:s3cretRedis@localhost:6379/0", "s3cretRedis"),
    ("url_credentials", "mongodb+srv://admin:p%40ssw0rd@cluster0.mongodb.net/db", "p%40ssw0rd"),
    ("basic_auth", "curl -u alice:s3cr3tpass https://api.example.com", "s3cr3tpass"),
    ("basic_auth", "curl --user 'alice:correct-horse-9' https://x", "correct-horse-9"),
    ("basic_auth", "wget --user=bob:Hunter22 https://x", "Hunter22"),
    ("cli_secret", "mysql -u root -pS3cretPass -h 127.0.0.1 shop", "S3cretPass"),
    ("cli_secret", "mysqldump -uroot -p'My Pass 1' db > dump.sql", "My Pass 1"),
    ("cli_secret", "sshpass -p 'Sup3rS3cret' ssh root@host", "Sup3rS3cret"),
    ("cli_secret", "docker login -u bob -p Dock3rPass registry.example.com", "Dock3rPass"),
    ("cli_secret", "vault login --password hunter2x", "hunter2x"),
    ("cli_secret", "keytool -importkeystore -storepass changeit2 -keypass K3yPass", "K3yPass"),
    ("cli_secret", "openssl pkcs12 -in a.p12 -passin pass:P12secret", "P12secret"),
    ("cli_secret", "redis-cli -h cache -a R3disPass ping", "R3disPass"),
    ("cli_secret", "oc login -u dev -p 0penShift!", "0penShift!"),
    ("cli_secret", 'mongosh "mongodb://db" -u admin -p M0ngoPass', "M0ngoPass"),
    ("cli_secret", 'gh secret set API_TOKEN --body "s3cr3t-v4lue"', "s3cr3t-v4lue"),
    ("aws_secret_access_key", f"aws configure set aws_secret_access_key {AWS_SECRET}", AWS_SECRET),
    ("sql_password", "CREATE USER 'app'@'%' IDENTIFIED BY 'MyS3cret!';", "MyS3cret!"),
    ("sql_password", "ALTER ROLE app WITH LOGIN PASSWORD 'Pg-s3cret';", "Pg-s3cret"),
    ("env_secret", "PGPASSWORD=s3cret psql -h db -U app", "s3cret"),
    ("netrc_password", "machine api.example.com login bob password N3trcPass", "N3trcPass"),
    # .env, YAML, JSON, INI, code literals
    ("env_secret", "PASSWORD=hunter2", "hunter2"),
    ("env_secret", "export DB_PASSWORD='Tr0ub4dor&3'", "Tr0ub4dor&3"),
    ("env_secret", 'SECRET="a very secret value"', "a very secret value"),
    ("env_secret", "TOKEN=abc123def456", "abc123def456"),
    ("env_secret", "API_KEY=qwerty12345", "qwerty12345"),
    ("env_secret", "JWT_SECRET=changeme", "changeme"),
    ("env_secret", "DJANGO_SECRET_KEY=django-insecure-abc123", "django-insecure-abc123"),
    ("mailgun_api_key", "MAILGUN_KEY=" + MAILGUN, MAILGUN),  # issue 15: named by its shape
    (
        "env_secret",
        "SLACK_SIGNING_SECRET=" + fake(HEX, 32, 63),
        fake(HEX, 32, 63),
    ),
    ("env_secret", "password: hunter2", "hunter2"),
    ("env_secret", "  db:\n    password: swordfish\n    host: localhost", "swordfish"),
    ("env_secret", "api_key: 'abc123xyz'", "abc123xyz"),
    ("env_secret", '{"user": "bob", "password": "hunter2"}', "hunter2"),
    ("env_secret", '{"client_secret":"' + GOOGLE_SECRET + '"}', GOOGLE_SECRET),
    ("env_secret", "[database]\npassword = Passw0rd!", "Passw0rd!"),
    ("env_secret", 'db_password = "hunter2"', "hunter2"),
    ("env_secret", "const apiKey = 'abc123xyz789';", "abc123xyz789"),
    ("env_secret", 'password := "gopher42"', "gopher42"),
    ("env_secret", "'password' => 'phpSecret1',", "phpSecret1"),
    ("env_secret", 'conn = connect(host="db", password="hunter2")', "hunter2"),
    ("env_secret", "Server=db;Database=app;User Id=sa;Password=Sql$erver1;", "Sql$erver1"),
    ("env_secret", "https://example.com/login?user=bob&password=hunter2&next=/", "hunter2"),
    ("env_secret", "**Password:** hunter2", "hunter2"),
    ("env_secret", 'echo \\"password\\": \\"esc4ped\\"', "esc4ped"),
    ("env_secret", "<password>M4venPass</password>", "M4venPass"),
    ("env_secret", "pw: hunter2", "hunter2"),
    ("env_secret", "X-API-Key: 4f9a8b7c6d5e", "4f9a8b7c6d5e"),
    (
        "env_secret",
        "heroku_api_key: 550e8400-e29b-41d4-a716-446655440000",
        "550e8400-e29b-41d4-a716-446655440000",
    ),
    # high-entropy values after weaker names
    ("high_entropy", f"signature: {HIGH_ENTROPY}", HIGH_ENTROPY),
    ("high_entropy", f'{{"key": "{HIGH_ENTROPY}"}}', HIGH_ENTROPY),
    ("high_entropy", f"X-Amz-Signature={fake(HEX, 64, 70)}&X-Amz-Date=20240101", fake(HEX, 64, 70)),
    ("high_entropy", f"session: {HIGH_ENTROPY}", HIGH_ENTROPY),
    # prose
    ("prose_password", "my password is hunter2", "hunter2"),
    ("prose_password", "The password for the staging db is Tr0ub4dor&3.", "Tr0ub4dor&3"),
    ("prose_password", "the root password is now P@ssw0rd!2024, please rotate", "P@ssw0rd!2024"),
    ("prose_password", "My gmail password is swordfish.", "swordfish"),
    (
        "prose_password",
        "passphrase is correct horse battery staple",
        "correct horse battery staple",
    ),
    ("prose_password", "The passphrase is 'open sesame'", "open sesame"),
    ("prose_password", "FYI the wifi password was changed to Kitten42", "Kitten42"),
    ("prose_password", "the password I set is hunter2 btw", "hunter2"),
    ("prose_password", "Password is: SwordFish", "SwordFish"),
    ("prose_password", "the token is 9f8e7d6c5b4a3f2e1d0c", "9f8e7d6c5b4a3f2e1d0c"),
    ("prose_password", "the pwd is qwerty123", "qwerty123"),
    ("prose_password", "log in as admin with password hunter2 please", "hunter2"),
    ("prose_password", "The password for user bob on prod is 'Sup3r!'", "Sup3r!"),
    ("env_secret", "user:bob password:hunter2", "hunter2"),
    ("env_secret", "data:\n  password: cGFzc3dvcmQxMjM=\n", "cGFzc3dvcmQxMjM="),
    ("env_secret", "API_KEY = abc123def", "abc123def"),
    ("pypi_token", "[distutils]\npassword = " + PYPI, PYPI),  # issue 15: named by its shape
    # <private>
    ("private", "keep this <private>my home address is 1 Main St</private> and this", "1 Main St"),
]

# Issue 15: the token families gitleaks' default rules and detect-secrets' plugins know,
# terraform's sensitive outputs, prose in other languages and app passwords.
TWILIO_AC = "AC" + fake(HEX, 32, 80)
DIGITS = string.digits
VENDOR_SECRETS = {
    "telegram_bot_token": fake(DIGITS, 10, 81) + ":AA" + fake(URLSAFE, 33, 82),
    "discord_bot_token": "M"
    + fake(ALNUM, 23, 83)
    + "."
    + fake(URLSAFE, 6, 84)
    + "."
    + fake(URLSAFE, 27, 85),
    "dockerhub_token": "dckr" + "_pat_" + fake(URLSAFE, 27, 86),
    "vault_token": "hv" + "s." + fake(URLSAFE, 90, 87),
    "databricks_token": "da" + "pi" + fake(HEX, 32, 89),
    "atlassian_token": "ATA" + "TT3" + fake(URLSAFE, 186, 90),
    "postman_api_key": "PM" + "AK-" + fake(HEX, 24, 91) + "-" + fake(HEX, 34, 92),
    "grafana_token": "gl" + "sa_" + fake(ALNUM, 32, 93) + "_" + fake(HEX, 8, 94),
    "shopify_token": "shp" + "at_" + fake(HEX, 32, 96),
    "square_token": "sq0" + "csp-" + fake(URLSAFE, 43, 97),
    "azure_ad_client_secret": fake(ALNUM, 3, 98) + "8Q" + "~" + fake(ALNUM + "_~.-", 34, 99),
    "digitalocean_token": "do" + "p_v1_" + fake(HEX, 64, 100),
    "doppler_token": "dp" + ".pt." + fake(ALNUM, 43, 101),
    "linear_api_key": "lin" + "_api_" + fake(ALNUM, 40, 102),
    "newrelic_key": "NR" + "AK-" + fake(UPPER_DIGITS, 27, 103),
    "heroku_api_key": "HR" + "KU-AA" + fake(URLSAFE, 58, 104),
    "sentry_token": "sntr" + "ys_eyJ" + fake(URLSAFE, 80, 105),
    "pulumi_token": "pu" + "l-" + fake(HEX, 40, 106),
    "flyio_token": "fo" + "1_" + fake(URLSAFE, 43, 107),
    "age_secret_key": "AGE-" + "SECRET-KEY-1" + fake("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58, 108),
    "onepassword_token": "op" + "s_eyJ" + fake(B64, 250, 109),
    "alibaba_access_key": "LT" + "AI" + fake(ALNUM, 20, 110),
    "asana_token": "1/" + fake(DIGITS, 16, 112) + ":" + fake(ALNUM, 32, 113),
    "airtable_token": "pa" + "t" + fake(ALNUM, 14, 114) + "." + fake(HEX, 64, 115),
    "vendor_token": "ruby" + "gems_" + fake(HEX, 48, 116),
}
OKTA = "00" + fake(URLSAFE, 40, 111)
APP_PASSWORD = " ".join(fake(string.ascii_lowercase, 4, 117 + i) for i in range(4))
TF_OUTPUT = json.dumps(
    {"db_password": {"sensitive": True, "type": "string", "value": "Tf-s3cret-99"}}, indent=2
)
POSITIVES += [
    *[(kind, f"found {secret} in the logs", secret) for kind, secret in VENDOR_SECRETS.items()],
    ("twilio_account_sid", f"TWILIO_ACCOUNT_SID={TWILIO_AC}", TWILIO_AC),
    ("twilio_auth_token", f'client = Client("{TWILIO_AC}", "{TWILIO_AUTH}")', TWILIO_AUTH),
    ("pypi_token", f"twine upload -u __token__ -p {PYPI} dist/*", PYPI),
    ("okta_token", f"curl -H 'Authorization: SSWS {OKTA}' https://x.okta.com/api/v1/users", OKTA),
    ("terraform_sensitive", TF_OUTPUT, "Tf-s3cret-99"),
    ("app_password", f"my gmail app password is {APP_PASSWORD}", APP_PASSWORD),
    ("prose_password", "mein Passwort ist Xy7#kL9", "Xy7#kL9"),
]


@pytest.mark.parametrize(("kind", "text", "secret"), POSITIVES)
def test_each_secret_is_removed_and_its_kind_reported(kind: str, text: str, secret: str) -> None:
    assert secret in text  # the fixture really contains it
    result = redact(text)
    assert secret not in result.text
    assert kind in result.kinds, result
    assert contains_secret(text)
    assert redact(result.text).text == result.text  # idempotent
    # every finding points at the original text, and the secret lies inside one of them
    at = text.index(secret)
    assert any(f.start <= at and at + len(secret) <= f.end for f in result.findings)


def test_every_kind_in_rules_has_a_positive_example() -> None:
    # key_value is redact_obj's; too_dense_to_check has a test of its own (below)
    covered = {kind for kind, _, _ in POSITIVES} | {"key_value", "too_dense_to_check"}
    assert set(RULES) == covered
    assert len(RULES) == len(set(RULES))


# --- what stays visible ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PASSWORD=hunter2", "PASSWORD=[REDACTED:env_secret]"),
        ("export API_KEY='abc123def'", "export API_KEY='[REDACTED:env_secret]'"),
        ('{"password": "hunter2"}', '{"password": "[REDACTED:env_secret]"}'),
        ("https://user:s3cret@host/x", "https://user:[REDACTED:url_credentials]@host/x"),
        ("curl -u alice:s3cret https://x", "curl -u alice:[REDACTED:basic_auth] https://x"),
        (f"Authorization: Bearer {OPAQUE}", "Authorization: Bearer [REDACTED:bearer_token]"),
        ("my password is hunter2.", "my password is [REDACTED:prose_password]."),
        (f"key {AWS_ID} leaked", "key [REDACTED:aws_access_key_id] leaked"),
        ("a <private>b</private> c", "a [private] c"),
        (f"x\n{pem('RSA')}\ny", "x\n[REDACTED:private_key]\ny"),
        (
            f"https://hooks.slack.com/services/{SLACK_HOOK_PATH}",
            "https://hooks.slack.com/services/[REDACTED:slack_webhook]",
        ),
        (
            f"Cookie: sid={OPAQUE}; theme=dark",
            "Cookie: sid=[REDACTED:cookie]; theme=[REDACTED:cookie]",
        ),
    ],
)
def test_only_the_secret_part_is_replaced(text: str, expected: str) -> None:
    assert redact(text).text == expected


# --- negatives: look-alikes survive unchanged ------------------------------------------------

NEGATIVES = [
    # hashes, ids, checksums
    "fixed in commit 3f2a9c1e7b4d5a6f7e8d9c0b1a2f3e4d5c6b7a8f",
    "see 3f2a9c1 and 9b8c7d6e for the fix",
    "request id 550e8400-e29b-41d4-a716-446655440000 failed",
    "session_id: 550e8400-e29b-41d4-a716-446655440000",
    '{"session_id": "550e8400-e29b-41d4-a716-446655440000", "transcript_path": "/tmp/t.jsonl"}',
    "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "md5sum a.tar.gz -> d41d8cd98f00b204e9800998ecf8427e",
    '"integrity": "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUR"',
    'etag: W/"5e15153d-120f"',
    # prose about secrets
    "rotate the API token every 90 days",
    "the password field must be hashed with argon2",
    "we store tokens in the OS keyring",
    "The password is hashed with bcrypt before it is stored.",
    "The password is required.",
    "the token is stored in the OS keyring",
    "Password: must be at least 8 characters",
    "Passwords are never logged.",
    "Your password is too short",
    "The password you entered is incorrect.",
    "The secret is to keep functions small.",
    "The API key is passed in the X-Api-Key header.",
    "the passphrase is correct.",
    "Basic authentication is insecure over HTTP.",
    "Use a Bearer token in the Authorization header.",
    "Bearer authentication uses opaque tokens",
    "Set the Authorization header to your token.",
    "Cookie: a small piece of data the server sends",
    "token_count=512",
    "max_tokens: 4096",
    '{"max_tokens": 4096, "input_tokens": 120, "token_count": 3}',
    "password_policy: strict",
    "author: Jane Doe",
    "password_min_length: 12",
    "TOKEN_EXPIRY=3600",
    "secret_name: prod/db/credentials",
    "token_type: bearer",
    "api_key_header = 'X-API-Key'",
    "passwordless: true",
    "secret: true",
    "password: null",
    "token: ~",
    # placeholders
    "API_KEY=${API_KEY}",
    "TOKEN=$GITHUB_TOKEN",
    "TOKEN=<your-token>",
    "password: <password>",
    "password: {{ vault_db_password }}",
    "token: ${{ secrets.GITHUB_TOKEN }}",
    "OPENAI_API_KEY=sk-xxxxxxxxxxxxxxxxxxxxxxxx",
    "PASSWORD=********",
    "SECRET_KEY=your-secret-key-here",
    "API_KEY=YOUR_API_KEY",
    "password: '%s'",
    'password = f"{password}"',
    'curl -H "Authorization: Bearer $TOKEN" https://api.example.com',
    "curl -H 'Authorization: Bearer <token>' https://api.example.com",
    "curl -u $USER:$PASS https://x",
    "postgres://user:${DB_PASSWORD}@localhost/db",
    "PGPASSWORD=$PGPASS psql",
    "mysql -u root -p shop",
    "mysql -u root -p$MYSQL_PWD shop",
    "docker run -u 1000:1000 alpine",
    "PWD=/home/alice/project",
    "SSH_KEY=/home/alice/.ssh/id_ed25519",
    "GOOGLE_APPLICATION_CREDENTIALS=/etc/gcp/sa.json",
    "password_file: ~/.config/app/password.txt",
    "--token-file ~/.config/gh/token",
    # code that names secrets without literal values
    'password = request.form["password"]',
    "const token = getToken()",
    "let token = await fetchToken();",
    "token = None",
    "self.password = password",
    "this.token = token;",
    "def check(password: str) -> bool:",
    "function login(username: string, password: string) {}",
    "password: Optional[str] = None",
    "token = tokenizer.encode(text)",
    "secret = os.environ['SECRET']",
    'api_key = os.getenv("OPENAI_API_KEY")',
    "client_secret=settings.CLIENT_SECRET,",
    "connect(user=user, password=password)",
    'return {"token": token, "expires": exp}',
    "if password == confirm_password:",
    "password = getpass.getpass()",
    "key = cache_key(user)",
    "for token in tokens:",
    "password = hash_password(raw)",
    'token := os.Getenv("TOKEN")',
    "const { token } = useAuth();",
    "$password = $_POST['password'];",
    "sort_key=lambda item: item.name",
    "token = pw",
    "if not password:",
    '<input type="password" name="password" autocomplete="current-password">',
    '{"password": {"type": "string", "minLength": 8}}',
    # found in real source trees (site-packages) while tuning the rules
    "private_key: ed25519.Ed25519PrivateKey, f_priv: _FragList",
    "key: PKCS12PrivateKeyTypes | None,",
    "session = Session.from_config(config)",
    "key = base64.urlsafe_b64decode(key)",
    "sig = mypy.stubtest.Signature.from_overloadedfuncdef(stub)",
    "config.stash[old_mark_config_key] = MARK_GEN._config",
    "MLKEM768X25519PrivateKey = rust_openssl.hpke.MLKEM768X25519PrivateKey",
    "_DESCRIPTOR_KEY = 'DESCRIPTOR'",
    'ExtendedKeyUsageOID.SERVER_AUTH: "serverAuth",',
    '_SK_START = b"-----BEGIN OPENSSH PRIVATE KEY-----"\n_SK_END = b"-----END OPENSSH PRIVATE KEY-----"',
    "'Authorization': auth,",
    "return {'authorization': 'Bearer ' + self.token}",
    'For example `{"Proxy-Authorization": "Basic <username>:<password>"}`.',
    'the entry `{\\"header.Authorization\\": \\"Bearer abc\\"}` is sent as `Authorization: Bearer abc`.',
    "if token is Name.Tag and value in self.keywords:",
    'Type of the token to request: `"read"` or `"write"`.',
    "Pass --token for a non-interactive login.",
    "use the --username and --password options instead of the URL",
    "git add -u :/",
    "key = 'arrow-datasets/nyc-taxi/year=2019/month=6/part-0.parquet'",
    '{"protocol": "hdfs", "username": "username", "password": "pwd"}',
    "'smb://myuser:mypassword@myserver.com/share/folder/file.csv'",
    "e.g. `pass` in `https://user:pass@host:port/path?query#fragment`",
    "postgres://user:password@localhost:5432/db",
    "--secrets SECRET=value",
    '{"access_token": "hf_jwt_…", "token_type": "bearer", "expires_in": 3600}',
    "access_key, secret_key = s3_connection",
    "Token:              '#ffffff',",
    "CONFIGFILE_KEY = 'pydantic-mypy'",
    '_IPV6_PAT = "(?:" + "|".join(variations) + ")"',
    "password: _PasswordType | None = None,",
    "long_auth = 'username:' + 'password'*10",
    "# Cache for the OIDC-exchanged token: re-exchanging on every call would be wasteful",
    '"account_key": "some-key",',
    'publicKeyToken="1fc8b3b9a1e18e3b"',
    'api_key="fal-ai-api-key",  # pass your fal.ai API key',
    "FillMaskOutputElement(score=0.06, token=11098, token_str=' happiness')",
    "token (Union[bool, str, None], optional):",
    "# cached token: `get_token()` may refresh an OAuth token",
    "the lazy fox -p x login",
    "Load and return a dynamic library identified by 'name'.",
    "password hashing uses argon2",
    "password reset link expired",
    # URLs, versions, paths, addresses, dates, identifiers, words
    "https://github.com/org/repo",
    "postgres://localhost:5432/db",
    "see https://docs.example.com/auth/tokens?tab=api#section",
    "git@github.com:org/repo.git",
    "version 1.2.3, v2.0.0-rc.1 and 10.4.2-beta+build.5",
    "/usr/local/lib/python3.11/site-packages/lexmem/redact.py",
    "C:\\Users\\alice\\AppData\\Local\\lexmem",
    "mail alice@example.com or bob.smith+tag@example.co.uk",
    "host 192.168.1.10, ::1 and 2001:db8::ff00:42:8329",
    "released 2024-06-01T12:30:45Z",
    "internationalization counterrevolutionaries",
    "getUserAuthenticationTokenFromSessionStorage",
    "AbstractSingletonProxyFactoryBean",
    "task-list desk-top risk-based whisk-like",
    "the ghp_ prefix marks a GitHub classic token",
    "keys start with sk- or sk-proj- at OpenAI",
    "AKIA is the prefix of AWS access key ids",
    "use pk_live_ keys in the browser only",
    "![diagram](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==)",
    "Tom's Key: the Tom and Jerry episode",
    "key: value",
    "secrets:\n  - name: db",
    "permissions: secrets:read, token:write",
    "keyboard: us",
    "session: 3",
    "the monkey: a primate",
    "",
    "plain text with nothing sensitive at all",
    "日本語のテキスト 🎉 émoji café",
]


@pytest.mark.parametrize("text", NEGATIVES)
def test_look_alikes_survive_unchanged(text: str) -> None:
    result = redact(text)
    assert result.text == text
    assert result.findings == ()
    assert not contains_secret(text)


# --- <private> spans --------------------------------------------------------------------------


def test_private_spans_are_dropped_case_insensitively_across_lines() -> None:
    text = "before <PRIVATE>line one\nline two\n</Private> middle <private>x</private> after"
    result = redact(text)
    assert result.text == "before [private] middle [private] after"
    assert [f.kind for f in result.findings] == ["private", "private"]
    assert text[result.findings[0].start : result.findings[0].end].lower().startswith("<private>")


def test_an_unclosed_private_tag_drops_everything_after_it() -> None:
    result = redact("public part <private>my diary\nmore\nand more")
    assert result.text == "public part [private]"


def test_secrets_inside_private_spans_count_once_as_private() -> None:
    result = redact(f"<private>PASSWORD=hunter2 and {GH['ghp']}</private>")
    assert result.text == "[private]"
    assert result.kinds == ("private",)
    assert result.count == 1


# --- results ----------------------------------------------------------------------------------


def test_findings_hold_positions_not_secrets() -> None:
    text = f"a PASSWORD=hunter2 b {GH['ghp']} c"
    result = redact(text)
    assert result.count == 2
    assert result.kinds == ("env_secret", "github_token")
    assert [text[f.start : f.end] for f in result.findings] == ["hunter2", GH["ghp"]]
    for f in result.findings:
        assert "hunter2" not in repr(f) and GH["ghp"] not in repr(f)
    assert "hunter2" not in repr(result.findings)


def test_finding_and_redaction_are_frozen_values() -> None:
    f = Finding("jwt", 1, 5)
    assert f == Finding("jwt", 1, 5) and hash(f) == hash(Finding("jwt", 1, 5))
    assert f != Finding("jwt", 1, 6)
    assert repr(f) == "Finding(kind='jwt', start=1, end=5)"
    with pytest.raises(AttributeError):
        f.kind = "x"  # type: ignore[misc]
    r = Redaction("t", (f,))
    assert r == Redaction("t", (Finding("jwt", 1, 5),))
    assert r.count == 1 and r.kinds == ("jwt",)
    with pytest.raises(AttributeError):
        r.text = "u"  # type: ignore[misc]
    match f:
        case Finding(kind, start, end):
            assert (kind, start, end) == ("jwt", 1, 5)


def test_overlapping_findings_merge_into_the_most_specific_kind() -> None:
    result = redact(f'GITHUB_TOKEN="{GH["ghp"]}"')
    assert result.text == 'GITHUB_TOKEN="[REDACTED:github_token]"'
    assert result.kinds == ("github_token",)


def test_empty_and_clean_text() -> None:
    assert redact("") == Redaction("", ())
    assert redact("hello").findings == ()
    assert not contains_secret("")


# --- redact_obj -----------------------------------------------------------------------------


ENV_FILE = (
    "# production\n"
    "DATABASE_URL=postgres://app:Db-Pa55word@db:5432/app\n"
    "DEBUG=false\n"
    f"STRIPE_SECRET_KEY={STRIPE_LIVE}\n"
    "SESSION_SECRET=keyboard-cat-42\n"
    "export OPENAI_API_KEY='" + OPENAI + "'\n"
    "PORT=8080\n"
)
HOOK_FIELDS = {
    "session_id": "550e8400-e29b-41d4-a716-446655440000",
    "transcript_path": "/home/alice/.claude/projects/x/550e8400.jsonl",
    "cwd": "/home/alice/project",
    "hook_event_name": "PostToolUse",
}


def test_redact_obj_cleans_a_claude_code_bash_post_tool_use_payload() -> None:
    payload = {
        **HOOK_FIELDS,
        "tool_name": "Bash",
        "tool_input": {
            "command": f'curl -s -H "Authorization: Bearer {OPAQUE}" https://api.example.com/v1/me',
            "description": "Check who the token belongs to",
        },
        "tool_response": {
            "stdout": f"[default]\naws_access_key_id = {AWS_ID}\naws_secret_access_key = {AWS_SECRET}\n",
            "stderr": "",
            "interrupted": False,
            "isImage": False,
        },
        "usage": {"input_tokens": 1200, "output_tokens": 80, "max_tokens": 4096},
    }
    before = json.dumps(payload)
    cleaned, count = redact_obj(payload)
    dumped = json.dumps(cleaned)
    for secret in (OPAQUE, AWS_ID, AWS_SECRET):
        assert secret in before and secret not in dumped
    assert count == 3
    assert json.dumps(payload) == before  # the input is not modified
    assert {k: cleaned[k] for k in HOOK_FIELDS} == HOOK_FIELDS
    assert cleaned["usage"] == payload["usage"]
    assert cleaned["tool_response"]["interrupted"] is False
    assert cleaned["tool_input"]["command"] == (
        'curl -s -H "Authorization: Bearer [REDACTED:bearer_token]" https://api.example.com/v1/me'
    )
    assert cleaned["tool_response"]["stdout"] == (
        "[default]\naws_access_key_id = [REDACTED:aws_access_key_id]\n"
        "aws_secret_access_key = [REDACTED:aws_secret_access_key]\n"
    )
    assert redact_obj(cleaned) == (cleaned, 0)  # idempotent: the service redacts again


def test_redact_obj_cleans_an_env_file_read_by_the_agent() -> None:
    payload = {
        **HOOK_FIELDS,
        "tool_name": "Read",
        "tool_input": {"file_path": "/home/alice/project/.env"},
        "tool_response": {
            "type": "text",
            "file": {"filePath": "/home/alice/project/.env", "content": ENV_FILE, "numLines": 7},
        },
    }
    cleaned, count = redact_obj(payload)
    content = cleaned["tool_response"]["file"]["content"]
    for secret in ("Db-Pa55word", STRIPE_LIVE, "keyboard-cat-42", OPENAI):
        assert secret not in content
    assert count == 4
    assert content.splitlines() == [
        "# production",
        "DATABASE_URL=postgres://app:[REDACTED:url_credentials]@db:5432/app",
        "DEBUG=false",
        "STRIPE_SECRET_KEY=[REDACTED:stripe_key]",
        "SESSION_SECRET=[REDACTED:env_secret]",
        "export OPENAI_API_KEY='[REDACTED:openai_api_key]'",
        "PORT=8080",
    ]
    assert cleaned["tool_input"] == payload["tool_input"]


def test_redact_obj_replaces_values_under_secret_like_keys_whole() -> None:
    obj = {
        "password": "correct horse",
        "Authorization": "Bearer abc",
        "api_key": 12345,
        "apiKey": "plain",
        "client-secret": "x1",
        "DB_PASSWORD": "pw-42",
        "STRIPE_KEY": "whatever",
        "cookie": "a=b",
        "credentials": {"username": "bob", "token": "t0k"},
        "private_key_id": "abc",
        "nested": [{"secret": "s"}, ("pwd", {"passwd": "p"})],
    }
    cleaned, count = redact_obj(obj)
    marker = "[REDACTED:key_value]"
    assert cleaned == {
        "password": marker,
        "Authorization": marker,
        "api_key": marker,
        "apiKey": marker,
        "client-secret": marker,
        "DB_PASSWORD": marker,
        "STRIPE_KEY": marker,
        "cookie": marker,
        "credentials": {"username": "bob", "token": marker},
        "private_key_id": marker,
        "nested": [{"secret": marker}, ("pwd", {"passwd": marker})],
    }
    assert count == 12
    assert isinstance(cleaned["nested"][1], tuple)


def test_redact_obj_leaves_look_alike_keys_and_other_scalars_alone() -> None:
    obj = {
        "token_count": 512,
        "max_tokens": 4096,
        "password_policy": "strict",
        "author": "Jane",
        "secret": True,
        "password": None,
        "token": "",
        "api_key": "${OPENAI_API_KEY}",
        "key": "Enter",
        "sort_key": "name",
        "public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG...",
        "tokens": ["a", "b"],
        "ratio": 0.5,
        1: "one",
    }
    cleaned, count = redact_obj(obj)
    assert cleaned == obj
    assert count == 0


def test_redact_obj_treats_every_entry_of_a_secrets_mapping_as_secret() -> None:
    obj = {
        "secrets": {"DB": "hunter2", "PORT_SALT": 12345, "ON": True, "REF": "${X}"},
        "env": {"A": "b"},
    }
    cleaned, count = redact_obj(obj)
    assert cleaned == {
        "secrets": {
            "DB": "[REDACTED:key_value]",
            "PORT_SALT": "[REDACTED:key_value]",
            "ON": True,
            "REF": "${X}",
        },
        "env": {"A": "b"},
    }
    assert count == 2


def test_redact_obj_flags_random_values_under_weak_keys() -> None:
    cleaned, count = redact_obj({"signature": HIGH_ENTROPY, "key": HIGH_ENTROPY, "key2": "short"})
    assert cleaned == {
        "signature": "[REDACTED:high_entropy]",
        "key": "[REDACTED:high_entropy]",
        "key2": "short",
    }
    assert count == 2


def test_redact_obj_redacts_strings_everywhere_including_keys() -> None:
    cleaned, count = redact_obj([f"token {GH['ghp']}", {"https://u:pw1234@h": 1}, 7, None])
    assert cleaned == [
        "token [REDACTED:github_token]",
        {"https://u:[REDACTED:url_credentials]@h": 1},
        7,
        None,
    ]
    assert count == 2
    assert redact_obj("PASSWORD=x1y2z3") == ("PASSWORD=[REDACTED:env_secret]", 1)
    assert redact_obj(42) == (42, 0)


# --- scale, unicode, idempotence ----------------------------------------------------------------


def test_a_megabyte_of_text_is_redacted() -> None:
    rng = random.Random(5)
    chunks = []
    secrets = []
    while sum(map(len, chunks)) < 1_000_000:
        chunks.append(" ".join(rng.choice(PLAIN_WORDS) for _ in range(200)) + "\n")
        if len(chunks) % 50 == 0:
            secret = "ghp_" + fake(ALNUM, 36, len(chunks))
            secrets.append(secret)
            chunks.append(f"GITHUB_TOKEN={secret}\n")
    text = "".join(chunks)
    assert len(text) >= 1_000_000
    result = redact(text)
    assert result.count == len(secrets)
    assert not any(s in result.text for s in secrets)


def test_unicode_text_keeps_positions_right() -> None:
    secret = GH["ghp"]
    text = f"İstanbul café 🎉 日本語 token={secret} — ﬁn\nパスワード password: hunter2 ✓"
    result = redact(text)
    assert secret not in result.text and "hunter2" not in result.text
    assert [text[f.start : f.end] for f in result.findings] == [secret, "hunter2"]
    assert result.text.startswith("İstanbul café 🎉 日本語 token=[REDACTED:")
    assert result.text.endswith("password: [REDACTED:env_secret] ✓")


@pytest.mark.parametrize("text", [t for _, t, _ in POSITIVES] + NEGATIVES)
def test_redaction_is_idempotent(text: str) -> None:
    once = redact(text).text
    assert redact(once).text == once
    assert not contains_secret(once)


# --- property-style: random prose with embedded secrets and look-alikes -------------------------

PLAIN_WORDS = [
    "the",
    "a",
    "we",
    "deploy",
    "fix",
    "test",
    "build",
    "user",
    "config",
    "server",
    "data",
    "file",
    "commit",
    "merge",
    "branch",
    "is",
    "was",
    "for",
    "with",
    "on",
    "of",
    "to",
    "and",
    "review",
    "release",
    "note",
    "docs",
    "cache",
    "queue",
    "worker",
    "error",
    "retry",
    "timeout",
    "latency",
    "migration",
    "schema",
    "index",
    "query",
    "report",
    "metric",
]
# Prose that talks about secrets; "password is <look-alike>" is avoided (that may well be one).
WORDS = [*PLAIN_WORDS, "token", "password", "key", "secret", "rotate", "keyring", "vault"]


def rand(alphabet: str, n: int) -> Any:
    """A maker of random strings for the property tests."""
    return lambda g: fake(alphabet, n, g.randrange(1 << 30))


def basic_credentials(g: random.Random) -> str:
    return base64.b64encode(("u:" + fake(ALNUM, 12, g.randrange(1 << 30))).encode()).decode()


# (template with {s} where the secret goes, maker of the secret)
SECRET_MAKERS: list[tuple[str, Any]] = [
    ("{s}", lambda g: "AK" + "IA" + rand(UPPER_DIGITS, 16)(g)),
    ("aws_secret_access_key = {s}", rand(B64, 40)),
    ("{s}", lambda g: "AI" + "za" + rand(URLSAFE, 35)(g)),
    ("AccountName=a;AccountKey={s};", lambda g: rand(B64, 86)(g) + "=="),
    ("https://a.blob.core.windows.net/c?sv=2022&sig={s}", lambda g: rand(ALNUM, 30)(g) + "%3D"),
    ("{s}", lambda g: g.choice(["ghp", "gho", "ghu", "ghs", "ghr"]) + "_" + rand(ALNUM, 36)(g)),
    ("{s}", lambda g: "github" + "_pat_" + rand(ALNUM, 22)(g) + "_" + rand(ALNUM, 59)(g)),
    ("{s}", lambda g: "gl" + "pat-" + rand(ALNUM, 20)(g)),
    ("{s}", lambda g: "npm" + "_" + rand(ALNUM, 36)(g)),
    ("{s}", lambda g: "hf" + "_" + rand(ALNUM, 34)(g)),
    ("{s}", lambda g: "sk" + "-" + rand(ALNUM, 48)(g)),
    ("{s}", lambda g: "sk" + "-proj-" + rand(URLSAFE, 100)(g)),
    ("{s}", lambda g: "sk" + "-ant-api03-" + rand(URLSAFE, 90)(g)),
    ("{s}", lambda g: g.choice(["sk_live_", "rk_live_", "sk_test_"]) + rand(ALNUM, 30)(g)),
    (
        "{s}",
        lambda g: (
            "xox" + g.choice("bpar") + "-" + rand(string.digits, 11)(g) + "-" + rand(ALNUM, 24)(g)
        ),
    ),
    (
        "https://hooks.slack.com/services/{s}",
        lambda g: (
            "T"
            + rand(UPPER_DIGITS, 9)(g)
            + "/B"
            + rand(UPPER_DIGITS, 9)(g)
            + "/"
            + rand(ALNUM, 24)(g)
        ),
    ),
    ("{s}", lambda g: "SG" + "." + rand(URLSAFE, 22)(g) + "." + rand(URLSAFE, 43)(g)),
    ("{s}", lambda g: "SK" + rand(HEX, 32)(g)),
    ("TWILIO_AUTH_TOKEN={s}", rand(HEX, 32)),
    ("-----BEGIN RSA PRIVATE KEY-----\n{s}\n-----END RSA PRIVATE KEY-----", rand(B64, 64)),
    (
        "{s}",
        lambda g: (
            "eyJ"
            + rand(URLSAFE, 30)(g)
            + ".eyJ"
            + rand(URLSAFE, 40)(g)
            + "."
            + rand(URLSAFE, 43)(g)
        ),
    ),
    ("Authorization: Bearer {s}", rand(ALNUM, 32)),
    ("Authorization: Basic {s}", basic_credentials),
    ("https://bob:{s}@db.example.com/x", rand(ALNUM, 14)),
    ("curl -u bob:{s} https://x", rand(ALNUM, 12)),
    ("mysql -uroot -p{s} db", rand(ALNUM, 12)),
    ("PASSWORD={s}", rand(ALNUM, 14)),
    ("export DB_PASSWORD='{s}'", rand(ALNUM + "!@#%^&*", 14)),
    ("API_KEY={s}", rand(ALNUM, 20)),
    ('"client_secret": "{s}"', rand(ALNUM, 16)),
    ("apiKey: {s}", rand(ALNUM, 16)),
    ("signature: {s}", rand(ALNUM, 32)),
    ("my password is {s}.", rand(ALNUM, 10)),
    ("<private>{s}</private>", lambda g: " ".join(g.choice(WORDS) for _ in range(5))),
]


SECRET_TALK = [
    "rotate the API token every 90 days.",
    "the password field must be hashed with argon2.",
    "we store tokens in the OS keyring.",
    "The secret is in the vault.",
    "Passwords are never logged.",
    "the key is in the keyring.",
]

LOOK_ALIKE_MAKERS = [
    lambda g: fake(HEX, g.choice([7, 12, 40]), g.randrange(1 << 30)),
    lambda g: "-".join(fake(HEX, n, g.randrange(1 << 30)) for n in (8, 4, 4, 4, 12)),
    lambda g: fake(HEX, 64, g.randrange(1 << 30)),
    lambda g: f"v{g.randrange(10)}.{g.randrange(30)}.{g.randrange(100)}",
    lambda g: f"/home/{g.choice(WORDS)}/{g.choice(WORDS)}/{g.choice(WORDS)}.py",
    lambda g: f"{g.choice(WORDS)}@example.com",
    lambda g: f"10.{g.randrange(256)}.{g.randrange(256)}.{g.randrange(256)}",
    lambda g: f"2024-0{g.randrange(1, 10)}-1{g.randrange(10)}T0{g.randrange(10)}:30:00Z",
    lambda g: "".join(w.capitalize() for w in g.sample(WORDS, 4)),
    lambda g: f"https://github.com/{g.choice(WORDS)}/{g.choice(WORDS)}",
    lambda g: f"token_count={g.randrange(10000)}",
    lambda g: f"max_tokens: {g.randrange(10000)}",
    lambda g: g.choice(
        ["task-list", "desk-top", "risk-free", "the ghp_ prefix", "password_policy: strict"]
    ),
]


@pytest.mark.parametrize("seed", range(25))
def test_random_prose_with_embedded_secrets_keeps_none_of_them(seed: int) -> None:
    rng = random.Random(seed)
    parts: list[str] = []
    secrets: list[str] = []
    for template, make in rng.sample(SECRET_MAKERS, len(SECRET_MAKERS)):
        parts.append(" ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 15))))
        secret = make(rng)
        secrets.append(secret)
        parts.append(template.format(s=secret))
    document = rng.choice(["\n", " \n", "\n\n"]).join(parts)
    result = redact(document)
    leaked = [s for s in secrets if s in result.text]
    assert leaked == []
    assert redact(result.text).text == result.text


@pytest.mark.parametrize("seed", range(25))
def test_random_prose_with_look_alikes_is_untouched(seed: int) -> None:
    rng = random.Random(1000 + seed)
    parts = []
    for _ in range(40):
        parts.append(" ".join(rng.choice(PLAIN_WORDS) for _ in range(rng.randrange(2, 10))))
        parts.append(rng.choice(LOOK_ALIKE_MAKERS)(rng))
        if rng.random() < 0.3:  # and prose about secrets, away from the look-alikes
            parts.append(rng.choice(SECRET_TALK))
    document = rng.choice([" ", "\n", ". "]).join(parts)
    result = redact(document)
    assert result.text == document, result.findings


# --- the hook's constraints -------------------------------------------------------------------


def test_importing_redact_loads_only_the_standard_library() -> None:
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import lexmem.capture.redact\n"
        "lexmem.capture.redact.redact('PASSWORD=hunter2 ' + 'gh' + 'p_' + 'a' * 36)\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "print(','.join(sorted(m for m in new if m not in sys.stdlib_module_names and m != 'lexmem')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_a_fresh_process_redacts_exactly_like_a_warm_one() -> None:
    """Rules compile lazily behind substring "needles"; a cold process must not miss."""
    samples = [text for _, text, _ in POSITIVES] + NEGATIVES
    code = (
        "import importlib, json, sys\n"
        "import lexmem.capture.redact as r\n"
        "out = []\n"
        "for t in json.load(sys.stdin):\n"
        "    r = importlib.reload(r)  # every sample meets cold rules\n"
        "    out.append(r.redact(t).text)\n"
        "print(json.dumps(out))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(samples),
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout) == [redact(t).text for t in samples]


def test_the_module_imports_nothing_from_lexmem_but_errors_and_base() -> None:
    import ast
    from pathlib import Path

    import lexmem.capture.redact as module

    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add(("." * node.level) + (node.module or ""))
    outside = {
        name
        for name in imported
        if name.split(".")[0] not in sys.stdlib_module_names
        and name not in ("lexmem.errors", ".errors", "lexmem.base")  # base: Frozen
    }
    assert outside == set()


# --- JSON-escaped text ------------------------------------------------------------------------


def test_a_value_in_json_escaped_text_ends_at_the_escaped_line_break() -> None:
    """An inbox file or a tool's JSON output holds a .env with "\\n" escapes: each value is
    still a value of its own, even when the next line would make the run look harmless."""
    env = (
        f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET}\n"
        f"GITHUB_TOKEN={GH['ghp']}\n"
        "DATABASE_URL=postgres://app:Tr0ub4dor-99@db.internal:5432/app\n"
        "password=hunter2x\n"
        "curl https://api.example.com/v1/health\n"
    )
    escaped = json.dumps(env)
    out = redact(escaped).text
    for secret in (AWS_SECRET, GH["ghp"], "Tr0ub4dor-99", "hunter2x"):
        assert secret not in out, out
    assert "https://api.example.com/v1/health" in out  # the next line is not swallowed
    assert json.loads(out).count("[REDACTED:") == 4
    # A value that merely contains an escape is still redacted whole.
    assert redact(r"PASSWORD=ab\ncd efg").text == "PASSWORD=[REDACTED:env_secret] efg"


# --- what reaches logs and the quarantine -------------------------------------------------------
# The byte scans of a whole data folder after a realistic workload are in test_security.py;
# these are the focused ones, one producer of log lines or quarantined files at a time.

LOGGED_SECRETS = [AWS_ID, AWS_SECRET, GH["ghp"], SLACK["xb"], OPENAI, JWT, *PEM_BODY.splitlines()]


def _env_file() -> str:
    return (
        f"export AWS_ACCESS_KEY_ID={AWS_ID}\n"
        f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET}\n"
        f"SLACK_BOT_TOKEN={SLACK['xb']}\n"
        f"OPENAI_API_KEY={OPENAI}\n"
        f"curl -H 'Authorization: Bearer {JWT}' https://api.example.com\n"
        f"{pem('RSA')}\n"
    )


def _secrets_in(data: bytes) -> list[str]:
    """The secrets ``data`` holds, whole or in part (its first or last 20 characters: a
    message that quotes a value cut to a few dozen characters still leaks it)."""
    return [
        s[:8] + "…"
        for s in LOGGED_SECRETS
        if any(part.encode() in data for part in (s, s[:20], s[-20:]))
    ]


def test_the_hook_log_quotes_what_it_could_not_use_without_a_secret(tmp_path: Any) -> None:
    """Every payload the hook rejects becomes one hook.log line that says what it got."""
    import os
    from pathlib import Path

    hook = Path(sys.executable).with_name("lexmem-hook")
    home = Path(os.environ["LEXMEM_HOME"])
    claude = {"session_id": "s-1", "cwd": str(tmp_path), "prompt": _env_file()}
    runs: list[tuple[list[str], bytes]] = [
        (["claude"], json.dumps({**claude, "hook_event_name": f"GITHUB_TOKEN={GH['ghp']}"}).encode()),
        (["event"], json.dumps({
            "session_id": "s-1", "event_id": "e-1", "content": _env_file(),
            "event_type": f"export OPENAI_API_KEY={OPENAI}",
        }).encode()),
        (["claude"], json.dumps({**claude, "hook_event_name": "UserPromptSubmit"}).encode()[:-30]),
        (["codex", json.dumps({"type": "agent-turn-complete", "input-messages": [_env_file()]})[:-5]], b""),
        (["nonsense", f"--token={GH['ghp']}"], b""),
    ]  # fmt: skip
    for args, payload in runs:
        proc = subprocess.run(
            [str(hook), *args], input=payload, capture_output=True, timeout=60, check=False
        )
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    log = (home / "logs" / "hook.log").read_bytes()
    assert log.count(b"\n") == len(runs), log.decode()
    assert b"[REDACTED:github_token]" in log and b"[REDACTED:openai_api_key]" in log
    assert _secrets_in(log) == []
    assert not list((home / "inbox").glob("*.json"))


def test_quarantined_files_their_audit_entries_and_the_log_line_hold_no_secret(
    lm: Any, tmp_path: Any
) -> None:
    """A bad inbox file may hold anything: the copy set aside, the reason recorded in the
    audit log and the service's log line all come out redacted."""
    import logging
    import time
    import uuid

    from lexmem.capture.inbox import Inbox, make_event
    from lexmem.cli import _log_to_file
    from lexmem.service.writer import CaptureService
    from lexmem.store.journal import Journal

    inbox = Inbox(lm.paths.inbox)
    inbox.ensure()
    broken = '{"v": 1, "event_type": "prompt", "content": ' + json.dumps(_env_file())[:-20]
    unknown_type = make_event("prompt", _env_file(), session_id="s-q")
    unknown_type["event_type"] = f"GITHUB_TOKEN={GH['ghp']}"
    bad_time = make_event("prompt", "deploy notes", session_id="s-q")
    bad_time["timestamp"] = f"AWS {AWS_ID}"
    bad_id = make_event("prompt", "deploy notes", session_id="s-q")
    bad_id["event_id"] = SLACK["xb"]
    for text in (broken, *(json.dumps(e) for e in (unknown_type, bad_time, bad_id))):
        name = f"{time.time_ns():020d}-{uuid.uuid4()}.json"
        (inbox.folder / name).write_text(text, encoding="utf-8")

    root = logging.getLogger("lexmem")
    before, level = list(root.handlers), root.level
    log_file = lm.paths.logs / "lexmem.log"
    _log_to_file(log_file)  # what `lexmem serve` sets up
    try:
        with CaptureService(lm) as service:
            report = service.drain()
    finally:
        for handler in [h for h in root.handlers if h not in before]:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(level)
    assert report.quarantined == 4 and inbox.pending() == []

    places: dict[str, bytes] = {p.name: p.read_bytes() for p in inbox.quarantined()}
    places["lexmem.log"] = log_file.read_bytes()
    entries = Journal(lm.store).audit_entries(decision="quarantined", limit=10)
    assert len(entries) == 4
    places["audit"] = json.dumps([e.to_dict() for e in entries]).encode()
    assert places["lexmem.log"].count(b"Quarantined") == 4
    found = {where: _secrets_in(data) for where, data in places.items() if _secrets_in(data)}
    assert found == {}


def test_the_llm_failure_lines_hold_no_credential_from_the_endpoint_url(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """``[llm] url`` may carry a key (user info, a query parameter): a failure names the
    endpoint in llm.json, the log and the error, but never with the key."""
    import socket

    from lexmem.config import Paths
    from lexmem.llm import LlmClient, LlmError
    from lexmem.settings import LlmSettings

    with socket.socket() as s:  # a port nothing listens on: the call fails at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    paths = Paths(tmp_path / "lexmem")
    paths.ensure()
    for url in (
        f"http://lexmem:{OPENAI}@127.0.0.1:{port}/v1",
        f"http://127.0.0.1:{port}/v1?api_key={OPENAI}",
    ):
        client = LlmClient(LlmSettings(url=url, timeout_s=5.0), paths)
        with caplog.at_level("WARNING", logger="lexmem.llm"), pytest.raises(LlmError) as exc:
            client.complete("Say hello")
        assert exc.value.reason == "unreachable"
        assert f"127.0.0.1:{port}" in str(exc.value)
        assert OPENAI not in str(exc.value)
        assert OPENAI not in client.status()["last_error"]
        assert OPENAI.encode() not in (paths.home / "llm.json").read_bytes()
    assert caplog.records and not [r for r in caplog.records if OPENAI in r.getMessage()]


def _pw(seed: int) -> str:
    """A made-up password with a digit, a symbol and both cases (never a real one)."""
    return fake(ALNUM, 8, seed) + "#" + fake(ALNUM, 5, seed + 1)


COMMAND_AND_FILE_SECRETS = [
    ("htpasswd -b -c /etc/nginx/.htpasswd admin {pw}", "cli_secret"),
    ("htpasswd -nb admin {pw}", "cli_secret"),
    ("ldapsearch -x -D 'cn=admin,dc=x' -w {pw} '(uid=a)'", "cli_secret"),
    ("smbclient //files/finance -U 'finance%{pw}' -c 'ls'", "cli_secret"),
    ("heroku config:set SECRET_KEY_BASE={pw} -a app", "env_secret"),
    ("define( 'DB_PASSWORD', '{pw}' );", "env_secret"),
    ('<add key="SmtpPassword" value="{pw}" />', "env_secret"),
    ('<param name="password" value="{pw}"/>', "env_secret"),
    ("$ cat ~/.pgpass\ndb.internal:5432:shop:app:{pw}\n", "cli_secret"),
    ("La contraseña de la base de datos es {pw}, cámbiala.", "prose_password"),
    ("La password del database è {pw}, cambiala.", "prose_password"),
    ("мой пароль {pw}, не говори никому", "prose_password"),
]


@pytest.mark.parametrize(("template", "kind"), COMMAND_AND_FILE_SECRETS)
def test_command_file_and_prose_secrets(template: str, kind: str) -> None:
    pw = _pw(len(template))
    result = redact(template.format(pw=pw))
    assert pw not in result.text and pw[:8] not in result.text, result.text
    assert kind in result.kinds


def test_bare_vendor_tokens_of_the_long_tail() -> None:
    tokens = [
        "r8_" + fake(ALNUM, 37, 1),  # Replicate
        "gsk_" + fake(ALNUM, 52, 2),  # Groq
        "sbp_" + fake(HEX, 40, 3),  # Supabase
        "M" + fake(URLSAFE, 25, 4) + "." + fake(URLSAFE, 6, 5) + "." + fake(URLSAFE, 27, 6),
        "AAAA" + fake(URLSAFE, 7, 7) + ":APA91b" + fake(URLSAFE, 134, 8),  # Firebase
    ]
    for token in tokens:
        out = redact(f'client = sdk.Client("{token}").ping()').text
        assert token not in out and token[-10:] not in out, out


def test_an_app_password_a_few_words_after_its_name() -> None:
    out = redact("The app password Google generated for the relay is rtit lmjn tchf jtas -- ok")
    assert "rtit lmjn tchf jtas" not in out.text and out.kinds == ("app_password",)


@pytest.mark.parametrize(
    "text",
    [
        "define( 'DB_NAME', 'wordpress' );",
        '{"access_token": "hf_jwt_…", "token_type": "bearer", "expires_in": 3600}',
        "htpasswd -c /etc/nginx/.htpasswd admin",
        "ldapsearch -x -W -D 'cn=admin,dc=x'",
        "the app password is used for the mail relay only",
        "мой пароль слишком короткий",
        "La contraseña de la base de datos es incorrecta.",
        "KEY_BASE=abc",
        "localhost:5432:*:postgres:${PGPASSWORD}",
    ],
)
def test_their_look_alikes_survive(text: str) -> None:
    assert redact(text).text == text


@pytest.mark.parametrize(
    "unit", ["token: ", "password is x ", "Cookie: a=", "пароль ", '\\"pw\\": ']
)
def test_under_the_budget_text_of_nothing_but_candidates_is_dropped_whole(unit: str) -> None:
    text = unit * (400_000 // len(unit))
    result = redact(text, budget=True)
    assert result.text == "[REDACTED:too_dense_to_check]"
    assert result.kinds == ("too_dense_to_check",) and contains_secret(text, budget=True)
    assert redact(result.text, budget=True).text == result.text  # idempotent
    assert redact(result.text).text == result.text


@pytest.mark.parametrize("unit", ["token: ", "password is x ", "пароль "])
def test_without_the_budget_dense_text_is_read_rule_by_rule(unit: str) -> None:
    text = unit * (100_000 // len(unit))
    result = redact(text)
    assert "too_dense_to_check" not in result.kinds
    assert result.text == text  # none of these units holds a secret
    assert not contains_secret(text)


def _prose(size: int, word: str, seed: int) -> str:
    """Ordinary prose with ``word`` about once in sixteen words."""
    rng = random.Random(seed)
    vocab = " ".join(
        (
            "the a of to and in we our team shipped the release notes after a long meeting",
            "about this that with for on review plan deploy server database query cache users",
            "today tomorrow week it was agreed each new client gets one per session and rotates",
        )
    ).split()
    words: list[str] = []
    n = 0
    while n < size:
        w = word if rng.randrange(16) == 0 else rng.choice(vocab)
        if rng.randrange(12) == 0:
            w += "."
        words.append(w)
        n += len(w) + 1
    return " ".join(words)


@pytest.mark.parametrize("size", [300_000, 5_000_000])
def test_long_prose_that_often_says_token_is_kept_whole(size: int) -> None:
    # ``lexmem remember - < notes.txt``: a person's explicit text is never dropped as too
    # dense to check, however long it is and however often it says "token".
    for word in ("token", "tokan"):
        text = _prose(size, word, seed=size)
        result = redact(text)
        assert result.text == text, (word, result.kinds)
        assert not contains_secret(text)
    # ... and a secret inside it is still found, and only the secret goes
    pw = "hx7Qp2-" + fake(ALNUM, 12, 5)
    text = _prose(size, "token", seed=1)
    cut = text.index(" ", len(text) // 2)
    with_secret = text[:cut] + f" DB_PASSWORD={pw} " + text[cut + 1 :]
    out = redact(with_secret).text
    assert pw not in out and out.replace("[REDACTED:env_secret]", pw) == with_secret


def test_redact_obj_is_unbounded_unless_asked() -> None:
    text = "token: " * 60_000
    assert redact_obj({"note": text})[0] == {"note": text}
    done, count = redact_obj({"note": text}, budget=True)
    assert done == {"note": "[REDACTED:too_dense_to_check]"} and count == 1


def test_the_hook_redacts_within_the_budget() -> None:
    # The hook must return in tens of milliseconds whatever it is sent: its calls count
    # work (never time), and a content field of nothing but candidates is dropped whole.
    from lexmem.capture import hook

    # (what is over its budget is handed whole to the service, never dropped or kept raw)
    dense = "token: " * (hook.MAX_CONTENT_CHARS // 7)
    r = hook._Redactor(hook.HOOK_WORK_CHARS)
    with pytest.raises(hook._TooLarge):
        r.text(dense, hook.MAX_CONTENT_CHARS)
    with pytest.raises(hook._TooLarge):
        hook._Redactor(hook.HOOK_WORK_CHARS).obj({"prompt": dense}, hook.MAX_CONTENT_CHARS)
    # the service's redactor (no budget) reads the same text through
    assert hook._Redactor().text(dense, hook.MAX_CONTENT_CHARS) == redact(dense).text
    # ordinary text of the same length is redacted rule by rule, in the hook too
    prose = _prose(hook.MAX_CONTENT_CHARS, "token", seed=3)[: hook.MAX_CONTENT_CHARS]
    assert hook._Redactor(hook.HOOK_WORK_CHARS).text(prose, hook.MAX_CONTENT_CHARS) == prose


def test_the_budget_counts_work_not_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # Units are spent per candidate judged: the budgeted call stops once it has spent
    # base + len / every, the unbudgeted one spends no budget at all.
    import lexmem.capture.redact as rd

    spent = []
    real = rd._spend

    def counting(units: int = 1) -> None:
        spent.append(units)
        real(units)

    monkeypatch.setattr(rd, "_spend", counting)
    text = "token: " * 60_000
    rd.redact(text, budget=True)
    limit = rd._DENSE_BASE + len(text) // rd._DENSE_EVERY
    assert limit < sum(spent) <= limit + 8
    assert not rd._BUDGETS


def test_a_real_document_dense_with_credentials_is_redacted_not_dropped() -> None:
    # 600 records, each with a token and a session (two secrets every ~100 characters
    # over 60 KB): far denser than real text, and still redacted rule by rule.
    records = [
        {"user": f"u{i}", "token": fake(ALNUM, 32, i), "session": fake(HEX, 24, i + 1)}
        for i in range(600)
    ]
    text = json.dumps(records)
    result = redact(text)
    assert "too_dense_to_check" not in result.kinds
    assert result.count >= 600 and records[7]["token"] not in result.text
    assert '"user": "u7"' in result.text


def test_a_unified_diffs_line_markers_hide_nothing() -> None:
    pw, key = _pw(3), "sk_live_" + fake(ALNUM, 24, 9)
    diff = (
        "@@ -1,3 +1,3 @@\n"
        f"-mysql -u root -p{pw} shop\n"
        f"+htpasswd -b -c /etc/nginx/.htpasswd admin {pw}\n"
        f'-STRIPE_KEY="{key[:12]}" \\\n-    "{key[12:]}"\n'
        " unchanged context\n"
    )
    out = redact(diff).text
    assert pw not in out and pw[:8] not in out and key[12:] not in out, out
    assert out.startswith("@@ -1,3 +1,3 @@\n-mysql -u root -p[REDACTED:")
    assert "\n+htpasswd -b -c /etc/nginx/.htpasswd admin [REDACTED:" in out
