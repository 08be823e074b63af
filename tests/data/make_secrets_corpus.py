"""Build ``tests/data/secrets/corpus.jsonl``: secrets as they appear in agent sessions.

    python tests/data/make_secrets_corpus.py            # (re)write the corpus
    python tests/data/make_secrets_corpus.py --check    # exit 1 if the committed file is stale

Every secret here is FAKE: drawn from a seeded generator at build time, in the documented
shape of its format (prefixes, lengths and alphabets as gitleaks' default rules and
detect-secrets' plugins describe them), never a live credential. The same seed gives the
same file byte for byte, so the committed corpus is reproducible and a test checks that
it still matches this script.

One JSON object per line:

* ``{"id", "kind": "secret", "format", "text", "secret": [...]}``: ``text`` is the whole
  context as an agent session holds it (a shell command, a file's content, a stack trace,
  prose, a tool's output); ``secret`` lists the exact substrings of ``text`` that must not
  survive redaction (a key split across string literals has one entry per piece).
* ``{"id", "kind": "lookalike", "format", "text", "must_keep": [...]}``: text that only
  looks like a secret (git SHAs, UUIDs, digests, ...); ``must_keep`` lists the substrings
  that must survive unchanged.

Formats are grouped by family: vendor tokens, connection strings, CLI flags, config files,
prose in eleven languages, look-alike characters (fullwidth, NBSP, Cyrillic, zero-width),
escaped and split values, values with punctuation; then the look-alikes; then (added
last, so the rows before them keep their values) secrets named by what surrounds them
-- a URL path, a call's arguments, a base64 blob's key, a pipe into a command that reads
stdin, a YAML list, a table column, colour codes, a continued line, the command that
printed the value -- and their look-alikes.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import random
import string
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

SEED = 15
OUT = Path(__file__).resolve().parent / "secrets" / "corpus.jsonl"

LOWER = string.ascii_lowercase
UPPER = string.ascii_uppercase
DIGITS = string.digits
ALNUM = string.ascii_letters + DIGITS
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"
B32 = UPPER + "234567"
BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"


class Corpus:
    """The rows, with the checks that keep them honest (every secret is in its text)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.rows: list[dict[str, Any]] = []
        self._count: dict[str, int] = {}

    # -- random material -------------------------------------------------------------

    def fake(self, alphabet: str, n: int) -> str:
        """``n`` characters of ``alphabet``, mixing case and digits where it allows them
        (a real token does; a run of one class would look like a word)."""
        chars = [self.rng.choice(alphabet) for _ in range(n)]
        for i, pool in enumerate((LOWER, UPPER, DIGITS)):
            allowed = sorted(set(pool) & set(alphabet))
            if allowed and n >= 8 and not set(chars) & set(pool):
                chars[(i * 7 + 3) % n] = self.rng.choice(allowed)
        return "".join(chars)

    def password(self, n: int = 14, symbols: str = "#%+-.@^_!*") -> str:
        """A person's password: letters, digits and a few symbols, never a dictionary word."""
        core = self.fake(ALNUM, n - 2)
        return core[: n // 2] + self.rng.choice(symbols) + core[n // 2 :] + self.rng.choice(DIGITS)

    def pick(self, options: list[Any] | tuple[Any, ...]) -> Any:
        return self.rng.choice(options)

    # -- rows --------------------------------------------------------------------------

    def _id(self, fmt: str) -> str:
        self._count[fmt] = self._count.get(fmt, 0) + 1
        return f"{fmt}-{self._count[fmt]}"

    def secret(self, fmt: str, text: str, *secrets: str) -> None:
        assert secrets, fmt
        for s in secrets:
            assert s and s in text, (fmt, s, text)
            assert len(s) >= 6, (fmt, s)
        self.rows.append(
            {"id": self._id(fmt), "kind": "secret", "format": fmt, "text": text,
             "secret": list(secrets)}
        )  # fmt: skip

    def lookalike(self, fmt: str, text: str, *keep: str) -> None:
        assert keep, fmt
        for k in keep:
            assert k and k in text, (fmt, k, text)
        self.rows.append(
            {"id": self._id(fmt), "kind": "lookalike", "format": fmt, "text": text,
             "must_keep": list(keep)}
        )  # fmt: skip


# ---------------------------------------------------------------------------------------
# Contexts: where a value sits in a session. A *named* context says what the value is
# (an environment variable, a config key); a *bare* one leaves only the value's shape.


def named_contexts(c: Corpus, name: str, value: str, vendor: str) -> list[str]:
    key = name.lower()
    svc = vendor.lower().replace(" ", "_")
    return [
        f"$ cat .env\nAPP_ENV=production\nLOG_LEVEL=info\n{name}={value}\nFEATURE_FLAGS=checkout,search\n",
        f"export {name}={value}\n./scripts/deploy.sh --env staging --region eu-west-1",
        f"docker run --rm -e {name}={value} -p 8080:8080 ghcr.io/acme/api:1.4.2",
        json.dumps({svc: {key: value, "timeout": 30, "region": "eu-west-1"}}, indent=2),
        f"# config/settings.yaml\n{svc}:\n  {key}: {value}\n  retries: 3\n  timeout: 30\n",
        f'[{svc}]\n{key} = "{value}"\nendpoint = "https://api.example.com/v2"\n',
        f"$ env | grep {name.split('_', maxsplit=1)[0]}\n{name}={value}\n",
        f"jobs:\n  deploy:\n    runs-on: ubuntu-latest\n    env:\n      {name}: {value}\n"
        f"    steps:\n      - run: make deploy\n",
        f'settings = Settings(\n    {key}="{value}",\n    debug=False,\n)',
    ]


def bare_contexts(c: Corpus, value: str, vendor: str) -> list[str]:
    mod = vendor.lower().replace(" ", "")
    return [
        f"I generated a new {vendor} credential for CI: {value} -- can you add it to the "
        f"pipeline and re-run the failing job?",
        f'const client = new {vendor.replace(" ", "")}Client("{value}");\nawait client.ping();',
        f"Traceback (most recent call last):\n"
        f'  File "/srv/app/clients.py", line 88, in connect\n'
        f'    return {mod}.Client("{value}").ping()\n'
        f'  File "/usr/lib/python3.11/site-packages/{mod}/client.py", line 214, in ping\n'
        f"    raise AuthenticationError(response.status_code)\n"
        f"{mod}.errors.AuthenticationError: 401",
        f"2025-03-02T10:14:07.512Z INFO  worker-3 bootstrapping {vendor} integration with "
        f"{value} (scope=read,write)",
        f"Sure -- here's the snippet with your credential filled in:\n\n```python\nclient = "
        f'{mod}.Client("{value}")\n```\n\nRemember not to commit it.',
    ]


# ---------------------------------------------------------------------------------------
# Vendor tokens: (format, vendor, env name, maker, the shape alone identifies it)


def _vendor_specs(c: Corpus) -> list[tuple[str, str, str, Callable[[], str], bool]]:
    f = c.fake
    return [
        ("github_pat_classic", "GitHub", "GITHUB_TOKEN", lambda: "gh" + "p_" + f(ALNUM, 36), True),
        (
            "github_oauth_token",
            "GitHub",
            "GH_OAUTH_TOKEN",
            lambda: "gh" + "o_" + f(ALNUM, 36),
            True,
        ),
        ("github_app_token", "GitHub", "GH_APP_TOKEN", lambda: "gh" + "s_" + f(ALNUM, 36), True),
        (
            "github_fine_grained_pat",
            "GitHub",
            "GITHUB_PAT",
            lambda: "github_" + "pat_" + f(ALNUM, 22) + "_" + f(ALNUM, 59),
            True,
        ),
        ("gitlab_pat", "GitLab", "GITLAB_TOKEN", lambda: "gl" + "pat-" + f(URLSAFE, 20), True),
        (
            "gitlab_runner_token",
            "GitLab",
            "RUNNER_TOKEN",
            lambda: "gl" + "rt-" + f(URLSAFE, 20),
            True,
        ),
        (
            "slack_bot_token",
            "Slack",
            "SLACK_BOT_TOKEN",
            lambda: "xo" + "xb-" + f(DIGITS, 12) + "-" + f(DIGITS, 13) + "-" + f(ALNUM, 24),
            True,
        ),
        (
            "slack_user_token",
            "Slack",
            "SLACK_USER_TOKEN",
            lambda: (
                "xo"
                + "xp-"
                + f(DIGITS, 12)
                + "-"
                + f(DIGITS, 12)
                + "-"
                + f(DIGITS, 13)
                + "-"
                + f(HEX, 32)
            ),
            True,
        ),
        (
            "slack_app_token",
            "Slack",
            "SLACK_APP_TOKEN",
            lambda: (
                "xa" + "pp-1-A" + f(UPPER + DIGITS, 10) + "-" + f(DIGITS, 13) + "-" + f(HEX, 64)
            ),
            True,
        ),
        (
            "stripe_secret_key",
            "Stripe",
            "STRIPE_SECRET_KEY",
            lambda: "sk" + "_live_51" + f(ALNUM, 97),
            True,
        ),
        (
            "stripe_restricted_key",
            "Stripe",
            "STRIPE_RESTRICTED_KEY",
            lambda: "rk" + "_live_51" + f(ALNUM, 97),
            True,
        ),
        (
            "openai_project_key",
            "OpenAI",
            "OPENAI_API_KEY",
            lambda: "sk" + "-proj-" + f(URLSAFE, 74) + "T3Blbk" + "FJ" + f(URLSAFE, 74),
            True,
        ),
        (
            "openai_legacy_key",
            "OpenAI",
            "OPENAI_API_KEY",
            lambda: "sk" + "-" + f(ALNUM, 20) + "T3Blbk" + "FJ" + f(ALNUM, 20),
            True,
        ),
        (
            "anthropic_api_key",
            "Anthropic",
            "ANTHROPIC_API_KEY",
            lambda: "sk" + "-ant-api03-" + f(URLSAFE, 93) + "AA",
            True,
        ),
        (
            "anthropic_admin_key",
            "Anthropic",
            "ANTHROPIC_ADMIN_KEY",
            lambda: "sk" + "-ant-admin01-" + f(URLSAFE, 93) + "AA",
            True,
        ),
        (
            "google_api_key",
            "Google Maps",
            "GOOGLE_API_KEY",
            lambda: "AI" + "za" + f(URLSAFE, 35),
            True,
        ),
        ("twilio_api_key", "Twilio", "TWILIO_API_KEY", lambda: "S" + "K" + f(HEX, 32), True),
        ("twilio_auth_token", "Twilio", "TWILIO_AUTH_TOKEN", lambda: f(HEX, 32), False),
        ("mailgun_api_key", "Mailgun", "MAILGUN_API_KEY", lambda: "ke" + "y-" + f(HEX, 32), True),
        (
            "mailgun_signing_key",
            "Mailgun",
            "MAILGUN_WEBHOOK_SIGNING_KEY",
            lambda: f(HEX, 32) + "-" + f(HEX, 8) + "-" + f(HEX, 8),
            False,
        ),
        (
            "telegram_bot_token",
            "Telegram",
            "TELEGRAM_BOT_TOKEN",
            lambda: f(DIGITS, 10) + ":AA" + f(URLSAFE, 33),
            True,
        ),
        (
            "discord_bot_token",
            "Discord",
            "DISCORD_BOT_TOKEN",
            lambda: "MT" + f(ALNUM, 24) + "." + f(URLSAFE, 6) + "." + f(URLSAFE, 38),
            True,
        ),
        (
            "pypi_token",
            "PyPI",
            "PYPI_TOKEN",
            lambda: "pypi-" + "AgEIcHlwaS5vcmc" + f(URLSAFE, 150),
            True,
        ),
        (
            "dockerhub_pat",
            "Docker Hub",
            "DOCKERHUB_TOKEN",
            lambda: "dckr" + "_pat_" + f(URLSAFE, 27),
            True,
        ),
        ("vault_service_token", "Vault", "VAULT_TOKEN", lambda: "hv" + "s." + f(URLSAFE, 95), True),
        (
            "vault_batch_token",
            "Vault",
            "VAULT_BATCH_TOKEN",
            lambda: "hv" + "b." + f(URLSAFE, 150),
            True,
        ),
        (
            "databricks_token",
            "Databricks",
            "DATABRICKS_TOKEN",
            lambda: "da" + "pi" + f(HEX, 32),
            True,
        ),
        (
            "atlassian_api_token",
            "Atlassian",
            "JIRA_API_TOKEN",
            lambda: "ATATT3" + f(ALNUM, 177) + "=" + f(HEX.upper()[:16], 8),
            True,
        ),
        (
            "postman_api_key",
            "Postman",
            "POSTMAN_API_KEY",
            lambda: "PM" + "AK-" + f(HEX, 24) + "-" + f(HEX, 34),
            True,
        ),
        (
            "grafana_service_account_token",
            "Grafana",
            "GRAFANA_TOKEN",
            lambda: "gl" + "sa_" + f(ALNUM, 32) + "_" + f(HEX, 8),
            True,
        ),
        (
            "grafana_cloud_token",
            "Grafana Cloud",
            "GRAFANA_CLOUD_TOKEN",
            lambda: "gl" + "c_" + f(ALNUM, 120) + "==",
            True,
        ),
        ("npm_token", "npm", "NPM_TOKEN", lambda: "np" + "m_" + f(ALNUM, 36), True),
        (
            "huggingface_token",
            "Hugging Face",
            "HF_TOKEN",
            lambda: "h" + "f_" + f(string.ascii_letters, 34),
            True,
        ),
        (
            "sendgrid_api_key",
            "SendGrid",
            "SENDGRID_API_KEY",
            lambda: "S" + "G." + f(URLSAFE, 22) + "." + f(URLSAFE, 43),
            True,
        ),
        (
            "shopify_access_token",
            "Shopify",
            "SHOPIFY_ACCESS_TOKEN",
            lambda: "shp" + "at_" + f(HEX, 32),
            True,
        ),
        (
            "shopify_shared_secret",
            "Shopify",
            "SHOPIFY_API_SECRET",
            lambda: "shp" + "ss_" + f(HEX, 32),
            True,
        ),
        (
            "digitalocean_token",
            "DigitalOcean",
            "DIGITALOCEAN_TOKEN",
            lambda: "do" + "p_v1_" + f(HEX, 64),
            True,
        ),
        (
            "linear_api_key",
            "Linear",
            "LINEAR_API_KEY",
            lambda: "lin" + "_api_" + f(ALNUM, 40),
            True,
        ),
        ("doppler_token", "Doppler", "DOPPLER_TOKEN", lambda: "dp" + ".pt." + f(ALNUM, 43), True),
        (
            "newrelic_user_key",
            "New Relic",
            "NEW_RELIC_API_KEY",
            lambda: "NR" + "AK-" + f(UPPER + DIGITS, 27),
            True,
        ),
        (
            "sentry_user_token",
            "Sentry",
            "SENTRY_AUTH_TOKEN",
            lambda: "sntr" + "yu_" + f(HEX, 64),
            True,
        ),
        (
            "square_access_token",
            "Square",
            "SQUARE_ACCESS_TOKEN",
            lambda: "EA" + "AA" + f(URLSAFE, 60),
            True,
        ),
        (
            "mailchimp_api_key",
            "Mailchimp",
            "MAILCHIMP_API_KEY",
            lambda: f(HEX, 32) + "-us" + str(c.rng.randint(1, 21)),
            True,
        ),
        (
            "age_secret_key",
            "age",
            "SOPS_AGE_KEY",
            lambda: "AGE-SECRET-" + "KEY-1" + f(BECH32, 58),
            True,
        ),
        ("pulumi_token", "Pulumi", "PULUMI_ACCESS_TOKEN", lambda: "pu" + "l-" + f(HEX, 40), True),
        (
            "terraform_cloud_token",
            "Terraform Cloud",
            "TFE_TOKEN",
            lambda: f(LOWER + DIGITS, 14) + ".atlas" + "v1." + f(LOWER + DIGITS, 67),
            True,
        ),
        ("flyio_token", "Fly", "FLY_API_TOKEN", lambda: "fo" + "1_" + f(URLSAFE, 43), True),
        (
            "planetscale_password",
            "PlanetScale",
            "PLANETSCALE_PASSWORD",
            lambda: "pscale" + "_pw_" + f(URLSAFE, 43),
            True,
        ),
        (
            "replicate_token",
            "Replicate",
            "REPLICATE_API_TOKEN",
            lambda: "r" + "8_" + f(ALNUM, 37),
            True,
        ),
        ("groq_api_key", "Groq", "GROQ_API_KEY", lambda: "gs" + "k_" + f(ALNUM, 52), True),
        (
            "rubygems_api_key",
            "RubyGems",
            "GEM_HOST_API_KEY",
            lambda: "rubygems" + "_" + f(HEX, 48),
            True,
        ),
        (
            "alibaba_access_key_id",
            "Alibaba Cloud",
            "ALIBABA_CLOUD_ACCESS_KEY_ID",
            lambda: "LT" + "AI" + f(ALNUM, 20),
            True,
        ),
        (
            "dynatrace_token",
            "Dynatrace",
            "DT_API_TOKEN",
            lambda: "dt0" + "c01." + f(UPPER + DIGITS, 24) + "." + f(UPPER + DIGITS, 64),
            True,
        ),
        (
            "airtable_pat",
            "Airtable",
            "AIRTABLE_TOKEN",
            lambda: "pat" + f(ALNUM, 14) + "." + f(HEX, 64),
            True,
        ),
        (
            "supabase_token",
            "Supabase",
            "SUPABASE_ACCESS_TOKEN",
            lambda: "sb" + "p_" + f(HEX, 40),
            True,
        ),
        (
            "azure_ad_client_secret",
            "Azure AD",
            "AZURE_CLIENT_SECRET",
            lambda: f(ALNUM, 3) + str(c.rng.randint(0, 9)) + "Q~" + f(ALNUM + "_~.-", 34),
            True,
        ),
        (
            "cloudflare_api_token",
            "Cloudflare",
            "CLOUDFLARE_API_TOKEN",
            lambda: f(URLSAFE, 40),
            False,
        ),
        ("datadog_api_key", "Datadog", "DD_API_KEY", lambda: f(HEX, 32), False),
        (
            "heroku_api_key",
            "Heroku",
            "HEROKU_API_KEY",
            lambda: str(uuid.UUID(int=c.rng.getrandbits(128))),
            False,
        ),
        (
            "firebase_fcm_server_key",
            "Firebase",
            "FCM_SERVER_KEY",
            lambda: "AAAA" + f(URLSAFE, 7) + ":APA91b" + f(URLSAFE, 134),
            True,
        ),
        (
            "onepassword_service_token",
            "1Password",
            "OP_SERVICE_ACCOUNT_TOKEN",
            lambda: "ops" + "_eyJ" + f(B64, 260),
            True,
        ),
    ]


def vendor_tokens(c: Corpus) -> None:
    named_pool = list(range(9))
    bare_pool = list(range(5))
    for fmt, vendor, env, make, shaped in _vendor_specs(c):
        # Two rows per format: one naming the value, one (when its shape is proof enough)
        # leaving only the shape; the contexts rotate so every one is used.
        value = make()
        c.secret(fmt, named_contexts(c, env, value, vendor)[c.pick(named_pool)], value)
        value = make()
        if shaped:
            c.secret(fmt, bare_contexts(c, value, vendor)[c.pick(bare_pool)], value)
        else:
            c.secret(fmt, named_contexts(c, env, value, vendor)[c.pick(named_pool)], value)

    # AWS: the id and its secret travel together.
    for ctx in range(3):
        key_id = "AK" + "IA" + c.fake(B32, 16)
        secret = c.fake(B64, 40)
        text = (
            f"[default]\naws_access_key_id = {key_id}\naws_secret_access_key = {secret}\n"
            f"region = eu-west-1\n",
            f"$ export AWS_ACCESS_KEY_ID={key_id}\n$ export AWS_SECRET_ACCESS_KEY={secret}\n"
            f"$ aws s3 ls s3://acme-backups/",
            json.dumps({"AccessKey": {"UserName": "ci-deployer", "AccessKeyId": key_id,
                                      "Status": "Active", "SecretAccessKey": secret,
                                      "CreateDate": "2025-02-11T09:12:44+00:00"}}, indent=4),
        )[ctx]  # fmt: skip
        c.secret("aws_access_key", text, key_id, secret)

    # Slack and Discord webhooks: the last path segment is the secret.
    hook = c.fake(ALNUM, 24)
    c.secret("slack_webhook", (
        "curl -X POST -H 'Content-type: application/json' --data '{\"text\":\"deploy done\"}' "
        f"https://hooks.slack.com/services/T{c.fake(UPPER + DIGITS, 9)}/B{c.fake(UPPER + DIGITS, 11)}/{hook}"
    ), hook)  # fmt: skip
    hook = c.fake(URLSAFE, 68)
    c.secret("discord_webhook", (
        f"DISCORD_WEBHOOK_URL=https://discord.com/api/webhooks/{c.fake(DIGITS, 19)}/{hook}"
    ), hook)  # fmt: skip


# ---------------------------------------------------------------------------------------
# Structured credentials


def _b64url(data: dict[str, Any]) -> str:
    return (
        base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode())
        .decode()
        .rstrip("=")
    )


def structured(c: Corpus) -> None:
    for i in range(3):
        jwt = ".".join((
            _b64url({"alg": "HS256", "typ": "JWT", "kid": c.fake(ALNUM, 12)}),
            _b64url({"sub": c.fake(DIGITS, 10), "name": "Priya Shah", "iat": 1716239022,
                     "scope": "admin"}),
            c.fake(URLSAFE, 43),
        ))  # fmt: skip
        text = (
            f"curl -s https://api.internal/v1/orders -H 'Authorization: Bearer {jwt}'",
            f"The session cookie after login was access_token={jwt}; it expires in an hour.",
            f'{{"token_type": "Bearer", "access_token": "{jwt}", "expires_in": 3600}}',
        )[i]
        c.secret("jwt", text, jwt)

    def pem(label: str, lines: int) -> tuple[str, list[str]]:
        body = [c.fake(B64, 64) for _ in range(lines)] + [c.fake(B64, 40) + "=="]
        return f"-----BEGIN {label}-----\n" + "\n".join(body) + f"\n-----END {label}-----", body

    block, body = pem("RSA PRIVATE KEY", 6)
    c.secret("pem_rsa_private_key", f"$ cat deploy/id_rsa\n{block}\n", *body)
    block, body = pem("PRIVATE KEY", 5)
    c.secret("pem_pkcs8_private_key", f"Write tls/server.key:\n{block}\n", *body)
    block, body = pem("OPENSSH PRIVATE KEY", 5)
    c.secret("openssh_private_key", f"~/.ssh/id_ed25519:\n{block}\n", *body)
    block, body = pem("EC PRIVATE KEY", 3)
    c.secret(
        "pem_ec_private_key",
        f"kubectl create secret tls web --key=<(cat <<'EOF'\n{block}\nEOF\n)",
        *body,
    )

    # A GCP service-account file: the key inside JSON, its newlines escaped as \n.
    block, body = pem("PRIVATE KEY", 4)
    sa = {
        "type": "service_account", "project_id": "acme-prod-4821",
        "private_key_id": c.fake(HEX, 40), "private_key": block + "\n",
        "client_email": "deployer@acme-prod-4821.iam.gserviceaccount.com",
        "client_id": c.fake(DIGITS, 21), "token_uri": "https://oauth2.googleapis.com/token",
    }  # fmt: skip
    c.secret("gcp_service_account_json", json.dumps(sa, indent=2), *body)

    key = c.fake(B64, 86) + "=="
    c.secret("azure_storage_connection_string", (
        "AZURE_STORAGE_CONNECTION_STRING=\"DefaultEndpointsProtocol=https;AccountName=acmeprodlogs;"
        f"AccountKey={key};EndpointSuffix=core.windows.net\""
    ), key)  # fmt: skip
    key = c.fake(B64, 43) + "="
    c.secret("azure_service_bus_connection_string", (
        f'"ServiceBus": "Endpoint=sb://acme-bus.servicebus.windows.net/;SharedAccessKeyName='
        f'RootManageSharedAccessKey;SharedAccessKey={key}"'
    ), key)  # fmt: skip
    sig = c.fake(ALNUM, 43) + "%3D"
    c.secret("azure_sas_token", (
        "az storage blob download --blob-url 'https://acmeprodlogs.blob.core.windows.net/exports/"
        f"2025-03.csv?sv=2022-11-02&ss=b&srt=o&sp=r&se=2025-04-01T00:00:00Z&sig={sig}'"
    ), sig)  # fmt: skip

    user_pass = "deploy:" + c.password(16)
    b = base64.b64encode(user_pass.encode()).decode()
    c.secret(
        "basic_auth_header",
        f"GET /v2/_catalog HTTP/1.1\nHost: registry.acme.dev\nAuthorization: Basic {b}\n",
        b,
    )
    opaque = c.fake(ALNUM, 40)
    c.secret(
        "bearer_token_opaque",
        f"http GET https://api.acme.dev/v1/me 'Authorization:Bearer {opaque}'",
        opaque,
    )
    sess = c.fake(ALNUM + "%", 48)
    c.secret("session_cookie", (
        f"curl 'https://admin.acme.dev/dashboard' -H 'Cookie: csrftoken=abc; sessionid={sess}' --compressed"
    ), sess)  # fmt: skip
    pw = c.password(18)
    auth = base64.b64encode(f"ci-bot:{pw}".encode()).decode()
    c.secret("docker_config_auth", json.dumps(
        {"auths": {"registry.acme.dev": {"auth": auth}}, "credsStore": ""}, indent=2
    ), auth)  # fmt: skip
    data = base64.b64encode(c.password(20).encode()).decode()
    c.secret("kubernetes_secret_data", (
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db-credentials\ntype: Opaque\ndata:\n"
        f"  username: YXBw\n  password: {data}\n"
    ), data)  # fmt: skip
    pw = c.password(16)
    c.secret("terraform_output_sensitive", json.dumps({
        "db_endpoint": {"sensitive": False, "type": "string", "value": "db.internal:5432"},
        "db_password": {"sensitive": True, "type": "string", "value": pw},
    }, indent=2), pw)  # fmt: skip
    tok = c.fake(ALNUM, 32)
    c.secret("terraform_output_sensitive", "$ terraform output -json\n" + json.dumps({
        "grafana_admin_token": {"sensitive": True, "type": "string", "value": tok},
    }, indent=2), tok)  # fmt: skip


# ---------------------------------------------------------------------------------------
# Connection strings


def connection_strings(c: Corpus) -> None:
    for fmt, template in (
        ("postgres_url", "DATABASE_URL=postgres://app_user:{pw}@db.internal.acme.dev:5432/shop?sslmode=require"),
        ("postgres_url", "psql 'postgresql://readonly:{pw}@10.0.3.17:5432/analytics' -c 'select 1'"),
        ("mongodb_srv_url", 'client = MongoClient("mongodb+srv://admin:{pw}@cluster0.x7k2p.mongodb.net/?retryWrites=true")'),
        ("mongodb_srv_url", "MONGO_URI=mongodb+srv://svc-orders:{pw}@orders.ab12c.mongodb.net/orders"),
        ("redis_url", "REDIS_URL=redis://default:{pw}@redis-12345.c1.eu-west-1.ec2.cloud.redislabs.com:12345/0"),
        ("redis_url", "celery worker --broker 'rediss://:{pw}@cache.acme.internal:6380/1'"),
        ("amqp_url", "CELERY_BROKER_URL=amqp://orders:{pw}@rabbitmq.internal:5672/orders_vhost"),
        ("mysql_url", "SQLALCHEMY_DATABASE_URI = 'mysql+pymysql://root:{pw}@127.0.0.1:3306/wordpress'"),
        ("smtp_url", "EMAIL_URL=smtp://postmaster%40mg.acme.dev:{pw}@smtp.mailgun.org:587"),
        ("jdbc_password", "spring.datasource.url=jdbc:postgresql://db:5432/app?user=app&password={pw}&ssl=true"),
        ("jdbc_password", 'jdbc:sqlserver://sql.acme.dev:1433;databaseName=erp;user=erp_app;password={pw};encrypt=true'),
        ("ado_net_connection_string", '"DefaultConnection": "Server=tcp:acme.database.windows.net,1433;Initial Catalog=shop;User ID=shop_app;Password={pw};Encrypt=True;"'),
        ("git_credential_url", "git clone https://oauth2:{pw}@gitlab.acme.dev/platform/infra.git"),
        ("ftp_url", "lftp -e 'mirror -R dist /www' ftp://deploy:{pw}@ftp.acme-hosting.net"),
    ):  # fmt: skip
        pw = c.password(c.rng.randint(12, 20))
        c.secret(fmt, template.format(pw=pw), pw)


# ---------------------------------------------------------------------------------------
# Command-line flags


def cli_flags(c: Corpus) -> None:
    for fmt, template in (
        ("mysql_p_flag", "mysql -h db.internal -u root -p{pw} shop < dump.sql"),
        ("mysql_p_flag", "mysqldump -uadmin -p'{pw}' --single-transaction shop > shop.sql"),
        ("password_flag", "pg_dump --dbname=shop --username=app --password={pw} > backup.sql"),
        ("password_flag", "./manage.py createsuperuser --username admin --password '{pw}' --noinput"),
        ("password_flag", "mongosh mongodb://db.internal:27017 --username admin --password {pw}"),
        ("sshpass", "sshpass -p '{pw}' ssh -o StrictHostKeyChecking=no deploy@203.0.113.10 'sudo systemctl restart api'"),
        ("sshpass", "sshpass -p {pw} scp build.tar.gz pi@192.168.1.42:/home/pi/"),
        ("curl_user_pass", "curl -u admin:{pw} https://jenkins.acme.dev/job/deploy/buildWithParameters -X POST"),
        ("curl_user_pass", "curl --user 'ci-bot:{pw}' -T artifact.zip https://nexus.acme.dev/repository/raw/"),
        ("docker_login_p", "docker login -u acmebot -p {pw} registry.acme.dev"),
        ("docker_login_p", "echo ok && docker login --username ci --password '{pw}' ghcr.io"),
        ("htpasswd_b", "htpasswd -b -c /etc/nginx/.htpasswd admin {pw}"),
        ("redis_cli_a", "redis-cli -h cache.internal -p 6379 -a {pw} FLUSHALL"),
        ("kubectl_from_literal", "kubectl create secret generic db --from-literal=username=app --from-literal=password={pw}"),
        ("openssl_passout", "openssl pkcs12 -export -in cert.pem -inkey key.pem -out bundle.p12 -passout pass:{pw}"),
        ("ldapsearch_w", "ldapsearch -x -H ldaps://ldap.acme.dev -D 'cn=admin,dc=acme,dc=dev' -w {pw} '(uid=priya)'"),
        ("smbclient_user_pct", "smbclient //fileserver/finance -U 'finance%{pw}' -c 'ls'"),
        ("az_login_sp", "az login --service-principal -u 3f1c0c2e-1111-4a5b-9c8d-0e1f2a3b4c5d -p {pw} --tenant acme.onmicrosoft.com"),
        ("gh_secret_set", "gh secret set DEPLOY_KEY --body '{pw}' --repo acme/api"),
        ("heroku_config_set", "heroku config:set SECRET_KEY_BASE={pw} -a acme-api"),
        ("pgpassword_env", "PGPASSWORD={pw} psql -h db.internal -U app shop -c '\\dt'"),
        ("wget_password", "wget --user=ci --password={pw} https://artifacts.acme.dev/releases/app-2.3.1.tar.gz"),
    ):  # fmt: skip
        pw = c.password(c.rng.randint(12, 18))
        c.secret(fmt, template.format(pw=pw), pw)
    token = "pypi-" + "AgEIcHlwaS5vcmc" + c.fake(URLSAFE, 140)
    c.secret("twine_upload_p", f"twine upload -u __token__ -p {token} dist/*", token)
    token = "pypi-" + "AgEIcHlwaS5vcmc" + c.fake(URLSAFE, 140)
    c.secret(
        "twine_upload_p",
        f"python -m twine upload --repository pypi --username __token__ --password {token} dist/acme-1.2.0*",
        token,
    )
    token = "np" + "m_" + c.fake(ALNUM, 36)
    c.secret("npmrc_auth_token", f"npm config set //registry.npmjs.org/:_authToken={token}", token)
    vt = "hv" + "s." + c.fake(URLSAFE, 95)
    c.secret("vault_login", f"$ vault login {vt}\nSuccess! You are now authenticated.", vt)


# ---------------------------------------------------------------------------------------
# Configuration files


def config_files(c: Corpus) -> None:
    p = c.password
    pw, key = p(16), c.fake(ALNUM, 40)
    c.secret("dotenv_file", (
        f"# .env.production\nNODE_ENV=production\nPORT=3000\nDB_HOST=db.internal\nDB_USER=shop\n"
        f"DB_PASSWORD={pw}\nSESSION_SECRET={key}\nSENTRY_ENVIRONMENT=production\n"
    ), pw, key)  # fmt: skip
    pw, sk = p(18), c.fake(ALNUM + "!@#%^*(-_=+)", 50)
    c.secret("django_settings", (
        f"SECRET_KEY = '{sk}'\nDEBUG = False\nDATABASES = {{\n    'default': {{\n"
        f"        'ENGINE': 'django.db.backends.postgresql',\n        'NAME': 'shop',\n"
        f"        'USER': 'shop',\n        'PASSWORD': '{pw}',\n        'HOST': 'db.internal',\n    }}\n}}\n"
    ), sk, pw)  # fmt: skip
    pw = p(16)
    c.secret("yaml_config", (
        f"database:\n  host: db.internal\n  port: 5432\n  user: orders\n  password: {pw}\n  pool: 20\n"
    ), pw)  # fmt: skip
    pw = p(16)
    c.secret("docker_compose_env", (
        "services:\n  db:\n    image: postgres:16\n    environment:\n      POSTGRES_USER: app\n"
        f"      POSTGRES_PASSWORD: \"{pw}\"\n    ports:\n      - \"5432:5432\"\n"
    ), pw)  # fmt: skip
    pw, tok = p(16), c.fake(ALNUM, 32)
    c.secret("json_config", json.dumps({
        "server": {"port": 8080}, "database": {"user": "app", "password": pw},
        "integrations": {"apiToken": tok, "enabled": True},
    }, indent=2), pw, tok)  # fmt: skip
    pw = p(16)
    c.secret("xml_config", (
        '<?xml version="1.0"?>\n<configuration>\n  <connectionStrings>\n'
        '    <add name="Main" connectionString="Data Source=sql01;Initial Catalog=erp;" />\n'
        f'  </connectionStrings>\n  <appSettings>\n    <add key="SmtpPassword" value="{pw}" />\n'
        '  </appSettings>\n</configuration>\n'
    ), pw)  # fmt: skip
    pw = p(16)
    c.secret("maven_settings_xml", (
        "<settings>\n  <servers>\n    <server>\n      <id>acme-releases</id>\n"
        f"      <username>deployer</username>\n      <password>{pw}</password>\n"
        "    </server>\n  </servers>\n</settings>\n"
    ), pw)  # fmt: skip
    pw = p(16)
    c.secret(
        "ini_config",
        f"[mysql]\nhost = db.internal\nuser = reporting\npassword = {pw}\ndatabase = reports\n",
        pw,
    )
    tok = "pypi-" + "AgEIcHlwaS5vcmc" + c.fake(URLSAFE, 140)
    c.secret(
        "pypirc",
        f"[distutils]\nindex-servers = pypi\n\n[pypi]\nusername = __token__\npassword = {tok}\n",
        tok,
    )
    pw = p(16)
    c.secret(
        "toml_config",
        f'[database]\nurl = "postgres://db.internal/shop"\nuser = "shop"\npassword = "{pw}"\n',
        pw,
    )
    pw = p(16)
    c.secret("netrc", f"machine api.heroku.com\n  login priya@acme.dev\n  password {pw}\n", pw)
    pw = p(16)
    c.secret("spring_properties", (
        "spring.datasource.url=jdbc:postgresql://db:5432/app\nspring.datasource.username=app\n"
        f"spring.datasource.password={pw}\nspring.jpa.hibernate.ddl-auto=validate\n"
    ), pw)  # fmt: skip
    pw = p(16)
    c.secret(
        "php_define",
        f"define( 'DB_NAME', 'wordpress' );\ndefine( 'DB_USER', 'wp' );\ndefine( 'DB_PASSWORD', '{pw}' );\n",
        pw,
    )
    pw = p(16)
    c.secret("pgpass", f"$ cat ~/.pgpass\ndb.internal:5432:shop:shop_app:{pw}\n", pw)
    pw = p(16)
    c.secret(
        "sql_create_user",
        f"CREATE USER reporting WITH PASSWORD '{pw}';\nGRANT SELECT ON ALL TABLES IN SCHEMA public TO reporting;",
        pw,
    )
    pw = p(16)
    c.secret("sql_create_user", f"ALTER USER 'app'@'%' IDENTIFIED BY '{pw}';", pw)


# ---------------------------------------------------------------------------------------
# Prose in eleven languages


def prose(c: Corpus) -> None:
    for lang, templates in (
        ("en", ("my password is {pw}, please don't share it", "The wifi password for the office is {pw} by the way.")),
        ("de", ("mein Passwort ist {pw}, bitte nicht weitergeben", "Das Kennwort für den Staging-Server lautet {pw} – bitte ändern.")),
        ("fr", ("le mot de passe est {pw} pour la base de staging", "Mon mot de passe : {pw} (ne le partage pas)")),
        ("es", ("mi contraseña es {pw} para el servidor de pruebas", "La contraseña de la base de datos es {pw}, cámbiala mañana.")),
        ("it", ("la mia password è {pw} per il server di test", "La password del database è {pw}, cambiala domani.")),
        ("pt", ("minha senha é {pw} no servidor de homologação", "A senha do banco é {pw}, troque amanhã.")),
        ("nl", ("mijn wachtwoord is {pw} voor de testserver", "Het wachtwoord van de database is {pw}, graag morgen wijzigen.")),
        ("ru", ("пароль: {pw}", "мой пароль {pw}, не говори никому")),
        ("ja", ("パスワードは{pw}です", "ステージングのパスワード：{pw}（共有しないでください）")),
        ("zh", ("密码是{pw}", "测试服务器的密码：{pw}，请不要外传")),
        ("ko", ("비밀번호는 {pw}입니다", "서버 비밀번호: {pw} 공유하지 마세요")),
    ):  # fmt: skip
        for t in templates:
            pw = c.password(c.rng.randint(10, 16))
            c.secret(f"prose_{lang}", t.format(pw=pw), pw)


# ---------------------------------------------------------------------------------------
# Look-alike characters, escaping and splitting


def tricks(c: Corpus) -> None:
    pw = c.password(16)
    c.secret("fullwidth_equals", f"DB_PASSWORD＝{pw}\nDB_HOST=db.internal", pw)
    pw = c.password(16)
    c.secret("fullwidth_colon", f"password：{pw}\nuser：admin", pw)
    tok = c.fake(ALNUM, 32)
    c.secret("fullwidth_colon", f"ＡＰＩ＿ＫＥＹ：{tok}", tok)
    pw = c.password(16)
    c.secret("nbsp", f"password:\u00a0{pw}", pw)
    pw = c.password(16)
    c.secret("nbsp", f"my\u00a0password\u00a0is\u00a0{pw}", pw)
    pw = c.password(16)
    c.secret("cyrillic_key", f"p\u0430ssw\u043erd={pw}", pw)  # а and о are Cyrillic
    tok = c.fake(ALNUM, 32)
    c.secret("cyrillic_key", f'"\u0441lient_secret": "{tok}"', tok)  # с is Cyrillic
    pw = c.password(16)
    c.secret("zero_width_key", f"PASS\u200bWORD={pw}", pw)
    tok = c.fake(ALNUM, 32)
    c.secret("zero_width_key", f"api\u200d_key: {tok}", tok)
    pw = c.password(16)
    c.secret("zero_width_key", f"export SECRET\u2060_KEY={pw}", pw)

    # Tool output that was JSON-encoded twice on the way (a log of a JSON payload).
    pw, tok = c.password(16), c.fake(ALNUM, 32)
    inner = json.dumps({"db": {"password": pw}, "api_token": tok})
    twice = json.dumps(json.dumps({"event": "config_loaded", "config": inner}))
    c.secret("double_json_escaped", f'{{"level":"debug","payload":{twice}}}', pw, tok)
    pw = c.password(16)
    env = f"DB_USER=app\nDB_PASSWORD={pw}\nLOG_LEVEL=info"
    c.secret(
        "double_json_escaped",
        json.dumps({"stdout": json.dumps({"file": ".env", "content": env})}),
        pw,
    )

    # A key split across concatenated literals (to dodge a pre-commit scanner).
    key = "sk" + "-proj-" + c.fake(URLSAFE, 74) + "T3Blbk" + "FJ" + c.fake(URLSAFE, 74)
    a, b, d = key[:56], key[56:112], key[112:]
    c.secret(
        "split_string_literal", f'OPENAI_API_KEY = (\n    "{a}"\n    "{b}"\n    "{d}"\n)', a, b, d
    )
    key = "gh" + "p_" + c.fake(ALNUM, 36)
    c.secret(
        "split_string_literal", f'const token = "{key[:20]}" + "{key[20:]}";', key[:20], key[20:]
    )
    key = "AK" + "IA" + c.fake(B32, 16)
    secret = c.fake(B64, 40)
    c.secret("split_string_literal", f'aws_secret = "{secret[:20]}" \\\n    "{secret[20:]}"  # {key}',
             secret[:20], secret[20:], key)  # fmt: skip

    # Gmail app passwords are four groups of four letters.
    for template in (
        'GMAIL_APP_PASSWORD="{pw}"',
        "The app password Google generated for the SMTP relay is {pw} -- paste it into Thunderbird.",
        "EMAIL_HOST_PASSWORD = '{pw}'",
    ):
        pw = " ".join(c.fake(LOWER, 4) for _ in range(4))
        c.secret("gmail_app_password", template.format(pw=pw), pw)


def punctuation(c: Corpus) -> None:
    c.secret("punctuation_value", "DB_PASSWORD=p4ss;w0rd!Xy\nDB_HOST=db.internal", "p4ss;w0rd!Xy")
    for ch in "&|,()'`[]{}\\;!":
        a, b = c.fake(ALNUM, 6), c.fake(ALNUM, 6)
        pw = f"{a}{ch}{b}"
        c.secret(
            "punctuation_value", f"$ cat .env\nAPP_NAME=shop\nDB_PASSWORD={pw}\nDB_PORT=5432\n", pw
        )
    pw = c.password(10) + "&|,()[]{}" + c.fake(ALNUM, 4)
    c.secret("punctuation_value", f'password = "{pw}"', pw)


# ---------------------------------------------------------------------------------------
# Look-alikes: machine-made strings that are not secrets


def lookalikes(c: Corpus) -> None:
    f = c.fake
    for _ in range(3):
        sha = f(HEX, 40)
        c.lookalike(
            "git_sha",
            f"commit {sha}\nAuthor: Priya Shah <priya@acme.dev>\nDate:   Tue Mar 4 10:12:01 2025 +0100\n\n    Fix retry loop in the payment worker\n",
            sha,
        )
    shas = [f(HEX, 10) for _ in range(4)]
    c.lookalike(
        "git_short_sha",
        "\n".join(
            f"{s} {m}"
            for s, m in zip(
                shas,
                (
                    "Fix flaky test",
                    "Bump deps",
                    "Add index on orders.user_id",
                    "Merge branch 'main'",
                ),
                strict=True,
            )
        ),
        *shas,
    )
    a, b = f(HEX, 12), f(HEX, 12)
    c.lookalike("commit_range", f"git diff {a}..{b} -- src/payments/", f"{a}..{b}")
    a, b = f(HEX, 40), f(HEX, 40)
    c.lookalike(
        "commit_range", f"Compare: https://github.com/acme/api/compare/{a}...{b}", f"{a}...{b}"
    )
    for template in (
        "request_id={u} status=500 path=/v1/orders duration_ms=812",
        '{{"session_id": "{u}", "event": "checkout_started"}}',
        "X-Request-Id: {u}",
        "Created volume pvc-{u} in namespace staging",
    ):
        u = str(uuid.UUID(int=c.rng.getrandbits(128), version=4))
        c.lookalike("uuid", template.format(u=u), u)
    for _ in range(2):
        digest = hashlib.sha256(f(ALNUM, 20).encode()).hexdigest()
        c.lookalike(
            "sha256_digest",
            f"$ sha256sum dist/acme-2.3.1.tar.gz\n{digest}  dist/acme-2.3.1.tar.gz",
            digest,
        )
    digest = hashlib.sha256(f(ALNUM, 20).encode()).hexdigest()
    c.lookalike("sha256_digest", f"acme-2.3.1-py3-none-any.whl --hash=sha256:{digest}", digest)
    digest = hashlib.sha1(f(ALNUM, 20).encode()).hexdigest()
    c.lookalike("sha1_digest", f"Verified: SHA1({digest}) matches the release manifest", digest)
    digest = hashlib.md5(f(ALNUM, 20).encode()).hexdigest()
    c.lookalike(
        "etag", f'HTTP/1.1 304 Not Modified\nETag: "{digest}"\nCache-Control: max-age=3600', digest
    )
    for _ in range(2):
        digest = hashlib.sha256(f(ALNUM, 20).encode()).hexdigest()
        c.lookalike(
            "docker_image_digest",
            f"docker pull ghcr.io/acme/api@sha256:{digest}\nDigest: sha256:{digest}\nStatus: Downloaded newer image",
            f"sha256:{digest}",
        )
    for _ in range(2):
        integ = (
            "sha512-" + base64.b64encode(hashlib.sha512(f(ALNUM, 20).encode()).digest()).decode()
        )
        c.lookalike(
            "npm_integrity",
            json.dumps(
                {
                    "node_modules/lodash": {
                        "version": "4.17.21",
                        "resolved": "https://registry.npmjs.org/lodash/-/lodash-4.17.21.tgz",
                        "integrity": integ,
                    }
                },
                indent=2,
            ),
            integ,
        )
    h1 = "h1:" + base64.b64encode(hashlib.sha256(f(ALNUM, 20).encode()).digest()).decode()
    c.lookalike("go_sum", f"github.com/stretchr/testify v1.9.0 {h1}", h1)
    cs = hashlib.sha256(f(ALNUM, 20).encode()).hexdigest()
    c.lookalike(
        "cargo_checksum",
        f'[[package]]\nname = "serde"\nversion = "1.0.197"\nsource = "registry+https://github.com/rust-lang/crates.io-index"\nchecksum = "{cs}"',
        cs,
    )
    for sentence in (
        "The deploy finished without errors and the cache was warmed.",
        "Meeting notes: migrate the orders table on Thursday after the release.",
    ):
        b = base64.b64encode(sentence.encode()).decode()
        c.lookalike("base64_prose", f"$ echo '{b}' | base64 -d\n{sentence}", b)
    for text, keep in (
        (
            "Successfully installed fastapi-0.110.2 pydantic-2.7.1 starlette-0.37.2 uvicorn-0.29.0",
            "pydantic-2.7.1",
        ),
        (
            "Bumped the chart to v2.14.3-rc.1+build.5 and the app to 1.22.0-beta.3",
            "v2.14.3-rc.1+build.5",
        ),
        ('"dependencies": {"react": "^18.2.0", "typescript": "~5.4.5"}', "~5.4.5"),
    ):
        c.lookalike("version_string", text, keep)
    for _ in range(2):
        cols = ["#" + f(HEX, 6) for _ in range(3)]
        c.lookalike(
            "css_colour",
            f".btn-primary {{\n  color: {cols[0]};\n  background: {cols[1]};\n  border: 1px solid {cols[2]};\n}}",
            *cols,
        )
    for _ in range(2):
        addrs = ["0x" + "00007f" + f(HEX, 10) for _ in range(3)]
        c.lookalike("stack_trace_hex", (
            "Fatal Python error: Segmentation fault\n\nThread 0x" + f(HEX, 12) + " (most recent call first):\n"
            f"  #0 {addrs[0]} in PyObject_Call ()\n  #1 {addrs[1]} in _PyEval_EvalFrameDefault ()\n"
            f"  #2 {addrs[2]} in main ()"
        ), *addrs)  # fmt: skip
    addr = "0x7f" + f(HEX, 10)
    c.lookalike("object_repr", f"<sqlalchemy.engine.base.Engine object at {addr}>", addr)
    for ident in (
        "AbstractSingletonProxyFactoryBeanConfigurationResolver",
        "test_password_reset_token_expires_after_thirty_minutes",
        "PASSWORD_RESET_TOKEN_TTL_SECONDS",
    ):
        c.lookalike(
            "long_identifier", f"grep -rn {ident} src/ tests/\nsrc/auth/reset.py:14: {ident}", ident
        )
    for text, keep in (
        ("password: ${DB_PASSWORD}", "${DB_PASSWORD}"),
        ("GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}", "${{ secrets.GITHUB_TOKEN }}"),
        ("API_KEY=<your-api-key-here>", "<your-api-key-here>"),
        ('token = os.environ["GITHUB_TOKEN"]', 'os.environ["GITHUB_TOKEN"]'),
        ('password = request.form["password"]', 'request.form["password"]'),
    ):
        c.lookalike("placeholder_or_reference", text, keep)
    acct = f(DIGITS, 12)
    c.lookalike(
        "aws_arn",
        f"Assumed role arn:aws:iam::{acct}:role/deploy-staging for session ci-4821",
        f"arn:aws:iam::{acct}:role/deploy-staging",
    )
    pods = [f"api-{f(LOWER + DIGITS, 10)}-{f(LOWER + DIGITS, 5)}" for _ in range(2)]
    c.lookalike(
        "k8s_pod_name",
        "NAME                         READY   STATUS    RESTARTS   AGE\n"
        + "\n".join(f"{p}   1/1     Running   0          3h" for p in pods),
        *pods,
    )
    pub = "AAAAC3NzaC1lZDI1NTE5AAAAI" + f(B64, 43)
    c.lookalike("ssh_public_key", f"ssh-ed25519 {pub} priya@laptop", pub)
    ipv6 = ":".join(f(HEX, 4) for _ in range(8))
    c.lookalike("ipv6_address", f"inet6 {ipv6}/64 scope global dynamic", ipv6)
    png = "iVBORw0KGgoAAAANSUhEUgAA" + f(B64, 80)
    c.lookalike("data_uri_image", f'<img src="data:image/png;base64,{png}" alt="logo">', png)
    c.lookalike(
        "password_policy_prose",
        "Passwords must be at least 12 characters long and contain a digit.",
        "must be at least 12 characters long",
    )
    c.lookalike(
        "password_policy_prose",
        "Reset your password at https://accounts.acme.dev/forgot-password?next=%2Fdashboard",
        "https://accounts.acme.dev/forgot-password?next=%2Fdashboard",
    )
    c.lookalike(
        "file_path",
        "Permission denied: '/etc/ssl/private/acme-wildcard.key'",
        "/etc/ssl/private/acme-wildcard.key",
    )
    url = "https://api.github.com/repos/acme/api/pulls?per_page=100&page=2&state=closed"
    c.lookalike("url_without_credentials", f"GET {url} -> 200 (84 items)", url)
    chunk = f"main.{f(HEX, 8)}.js"
    c.lookalike("bundle_hash", f"dist/assets/{chunk}   142.31 kB │ gzip: 45.02 kB", chunk)
    fp = " ".join(f(HEX.upper()[:16], 4) for _ in range(10))
    c.lookalike(
        "pgp_fingerprint", f"pub   ed25519 2024-01-02 [SC]\n      Key fingerprint = {fp}", fp
    )
    oid = hashlib.sha256(f(ALNUM, 20).encode()).hexdigest()
    c.lookalike(
        "git_lfs_pointer",
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize 48213",
        oid,
    )
    cus = "cus_" + f(ALNUM, 14)
    c.lookalike(
        "stripe_object_id",
        f"Refunded charge for customer {cus} (invoice in_1Ox{f(ALNUM, 20)})",
        cus,
    )
    c.lookalike(
        "bearer_docs",
        "Send the token in the Authorization header as `Bearer <token>`.",
        "`Bearer <token>`",
    )


# ---------------------------------------------------------------------------------------
# Secrets named by what surrounds them (issue 30): a URL path, a call's arguments, a
# base64 blob's key, a pipe into a command that reads stdin, a YAML list, a table column,
# colour codes, a continued line, the command that printed the value.


def _pem_b64(c: Corpus, label: str, lines: int = 6) -> str:
    body = "\n".join(c.fake(B64, 64) for _ in range(lines))
    pem = f"-----BEGIN {label}-----\n{body}\n-----END {label}-----\n"
    return base64.b64encode(pem.encode()).decode()


def surroundings(c: Corpus) -> None:
    f = c.fake
    for template in (
        "curl -s https://api.telegram.org/bot{tok}/getUpdates | jq '.result[-1]'",
        'resp = requests.post(f"https://api.telegram.org/bot{tok}/sendMessage", json={{"chat_id": chat, "text": msg}})',
        '127.0.0.1 - - [04/Mar/2025:10:12:01 +0000] "POST /bot{tok}/setWebhook HTTP/1.1" 200 63',
    ):  # fmt: skip
        tok = f"{c.rng.randrange(10**8, 10**10)}:AA{f(URLSAFE, 33)}"
        c.secret("telegram_url_path", template.format(tok=tok), tok)

    app = " ".join(f(LOWER, 4) for _ in range(4))
    c.secret("login_positional", f"server = smtplib.SMTP_SSL('smtp.gmail.com', 465)\nserver.login('me@gmail.com', '{app}')", app)  # fmt: skip
    pw = c.password(14)
    c.secret("login_positional", f'imap = imaplib.IMAP4_SSL("imap.acme.dev")\nimap.login("priya@acme.dev", "{pw}")', pw)  # fmt: skip
    pw = c.password(16)
    c.secret("login_positional", f"ftp = FTP('ftp.acme.dev')\nftp.login('deploy', '{pw}')\nftp.cwd('/releases')", pw)  # fmt: skip
    pw = c.password(15)
    c.secret("auth_tuple", f'r = requests.get("https://jenkins.acme.dev/api/json", auth=("ci-bot", "{pw}"), timeout=10)', pw)  # fmt: skip
    pw = c.password(13)
    c.secret("auth_tuple", f"async with httpx.AsyncClient(auth=('svc-reports', '{pw}')) as client:", pw)  # fmt: skip
    sid, tok = "AC" + f(HEX, 32), f(HEX, 32)
    c.secret("second_positional", f'client = Client(\n    "{sid}",\n    "{tok}",\n)\nclient.messages.create(to=to, from_=sender, body=body)', sid, tok)  # fmt: skip
    sk, secret = "SK" + f(HEX, 32), f(ALNUM, 32)
    c.secret("second_positional", f"client = Client('{sk}', '{secret}', account_sid)", sk, secret)  # fmt: skip
    key_id, secret = "AK" + "IA" + f(B32, 16), f(B64, 40)
    c.secret("second_positional", f"session = boto3.session.Session(\n    '{key_id}',\n    '{secret}',\n)", key_id, secret)  # fmt: skip

    for label in ("RSA PRIVATE KEY", "EC PRIVATE KEY"):
        blob = _pem_b64(c, label)
        cert = _pem_b64(c, "CERTIFICATE", 4)
        c.secret("pem_base64", (
            "apiVersion: v1\nkind: Config\nusers:\n- name: admin@prod\n  user:\n"
            f"    client-certificate-data: {cert}\n    client-key-data: {blob}\n"
        ), blob)  # fmt: skip
    blob = _pem_b64(c, "PRIVATE KEY")
    c.secret("pem_base64", json.dumps({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls", "data": {"tls.key": blob}}, indent=2), blob)  # fmt: skip
    for name in ("client-key-data", "encryptionKeyData", "secret_b64_payload", "token-blob"):
        blob = base64.b64encode(c.rng.randbytes(c.rng.randint(32, 64))).decode()
        c.secret("base64_named", f"  {name}: {blob}\n  rotation_days: 90\n", blob)

    pw = c.password(16)
    c.secret("password_stdin", f'echo "{pw}" | docker login ghcr.io -u acme-ci --password-stdin', pw)  # fmt: skip
    pw = c.password(14)
    c.secret("password_stdin", f"echo -n '{pw}' | helm registry login registry.acme.dev --username ci --password-stdin", pw)  # fmt: skip
    tok = "gh" + "o_" + f(ALNUM, 36)
    c.secret("password_stdin", f"echo {tok} | gh auth login --hostname github.acme.dev --with-token", tok)  # fmt: skip
    pw = c.password(12)
    c.secret("password_stdin", f'echo "deploy:{pw}" | sudo chpasswd', pw)
    pw = f(ALNUM, 5) + "&" + f(ALNUM, 5)
    c.secret("cli_ampersand", f"psql --host db.internal --username app --password {pw} shop", pw)  # fmt: skip
    key = f(ALNUM, 8) + "&" + f(ALNUM, 8)
    c.secret("cli_ampersand", f"./sync.sh --api-key {key} --dry-run", key)

    toks = [f(ALNUM, c.rng.randint(24, 40)) for _ in range(2)]
    c.secret("yaml_secret_list", "gateway:\n  api_tokens:\n" + "".join(f"    - {t}\n" for t in toks) + "  rate_limit: 100\n", *toks)  # fmt: skip
    pws = [c.password(14) for _ in range(2)]
    c.secret("yaml_secret_list", "admin_passwords:\n" + "".join(f'- "{p}"\n' for p in pws) + "region: eu-west-1\n", *pws)  # fmt: skip
    keys = [f(ALNUM, c.rng.randint(24, 36)) for _ in range(3)]
    c.secret("markdown_secret_column", (
        "| service | api key | owner |\n|---|---|---|\n"
        + "".join(f"| {s} | {k} | {o} |\n" for s, k, o in zip(("stripe", "sendgrid", "maps"), keys, ("billing", "growth", "web"), strict=True))
    ), *keys)  # fmt: skip
    pws = [c.password(14) for _ in range(2)]
    c.secret("markdown_secret_column", (
        "Staging hosts:\n\n| Host | User | Password |\n| :--- | :--- | :--- |\n"
        f"| db1.staging | app | `{pws[0]}` |\n| db2.staging | app | `{pws[1]}` |\n"
    ), *pws)  # fmt: skip

    a, b = f(URLSAFE, 40), f(URLSAFE, 40)
    c.secret("backslash_continuation", f"export OPENAI_API_KEY=sk-proj-{a}\\\n{b}\npython run.py", "sk-proj-" + a, b)  # fmt: skip
    a, b = c.password(10), f(ALNUM, 12)
    c.secret("backslash_continuation", f"DB_PASSWORD={a}\\\n    {b} ./migrate.sh --apply", a, b)  # fmt: skip
    val = f(ALNUM, 32)
    c.secret("ansi_colour", f"\x1b[1;32mSTRIPE_API_SECRET\x1b[0m=\x1b[33m{val}\x1b[0m\n\x1b[1;32mLOG_LEVEL\x1b[0m=\x1b[33minfo\x1b[0m", val)  # fmt: skip
    val = c.password(16)
    c.secret("ansi_colour", f'echo -e "\\e[1;32mDB_PASSWORD\\e[0m=\\e[33m{val}\\e[0m"', val)  # fmt: skip
    psk = c.password(c.rng.randint(12, 20))
    c.secret("nmcli_psk", (
        "$ nmcli --show-secrets connection show home-5G | grep 802-11\n"
        "802-11-wireless.ssid:                   home-5G\n"
        "802-11-wireless-security.key-mgmt:      wpa-psk\n"
        f"802-11-wireless-security.psk:           {psk}\n"
        "802-11-wireless-security.psk-flags:     0 (none)\n"
    ), psk)  # fmt: skip

    for command in (
        "$ echo $DB_PASSWORD",
        "dev@box:~/api$ echo \"${STRIPE_SECRET_KEY}\"",
        "$ kubectl get secret db-credentials -o jsonpath='{.data.password}' | base64 -d",
        "$ vault kv get -field=api_token secret/ci/deploy",
        "$ gh auth token",
    ):  # fmt: skip
        value = c.password(16) if "PASSWORD" in command or "password" in command else f(URLSAFE, 40)
        c.secret("printed_secret", f"{command}\n{value}\n$ ls\nREADME.md  src  tests\n", value)


def surroundings_lookalikes(c: Corpus) -> None:
    words = ("user", "orders", "tenant", "invoice", "session", "feed", "cart")
    idents = ("user_id", "order_id", "tenant", "job_id", "day", "region")
    c.lookalike("template_key", 'cache_key = f"user:{user_id}:profile:v3"', 'f"user:{user_id}:profile:v3"')  # fmt: skip
    for name in ("lock_key", "redis_key", "cache_key", "session_key"):
        value = f"{c.pick(words)}:{{{c.pick(idents)}}}:{c.pick(words)}:v{c.rng.randint(2, 40)}"
        c.lookalike("template_key", f'{name} = f"{value}"', value)
    value = f"{c.pick(words)}:{{{c.pick(idents)}}}:{{{c.pick(idents)}}}:v{c.rng.randint(2, 40)}"
    c.lookalike("template_key", f"key = f'{value}'\nredis.set(key, payload, ex=3600)", value)
    cert = _pem_b64(c, "CERTIFICATE", 4)
    c.lookalike("kubeconfig_certificate", (
        "clusters:\n- cluster:\n"
        f"    certificate-authority-data: {cert}\n    server: https://10.0.0.1:6443\n  name: prod\n"
    ), cert)  # fmt: skip
    for text, keep in (
        ("echo $CR_PAT | docker login ghcr.io -u USERNAME --password-stdin", "$CR_PAT"),
        ('echo "${{ secrets.REGISTRY_TOKEN }}" | docker login reg.acme.dev -u ci --password-stdin', "${{ secrets.REGISTRY_TOKEN }}"),
        ("services:\n  db:\n    image: postgres:16\n    secrets:\n      - db_password\n      - api_key\n", "- db_password\n      - api_key"),
        ("| token | count |\n|---|---|\n| the | 4211 |\n| payment | 17 |\n", "| the | 4211 |\n| payment | 17 |"),
        ("docker run --rm \\\n  -e LOG_LEVEL=info \\\n  -p 8080:8080 \\\n  ghcr.io/acme/api:1.4.2", "-e LOG_LEVEL=info"),
        ("\x1b[32mPASSED\x1b[0m tests/test_tokens.py::test_key_rotation \x1b[1m[100%]\x1b[0m", "tests/test_tokens.py::test_key_rotation"),
        ("$ echo $HOME\n/home/priya\n$ echo $SHELL\n/bin/zsh\n", "/home/priya"),
        ("$ kubectl get secret db -o jsonpath='{.data.username}' | base64 -d\napp_user7\n", "app_user7"),
        ("802-11-wireless-security.key-mgmt:      wpa-psk\n802-11-wireless-security.psk-flags:     0 (none)", "0 (none)"),
        ("server.login(user, password)\nserver.sendmail(sender, [to], msg.as_string())", "server.login(user, password)"),
    ):  # fmt: skip
        c.lookalike("surroundings_lookalike", text, keep)


def build(seed: int = SEED) -> list[dict[str, Any]]:
    c = Corpus(seed)
    vendor_tokens(c)
    structured(c)
    connection_strings(c)
    cli_flags(c)
    config_files(c)
    prose(c)
    tricks(c)
    punctuation(c)
    lookalikes(c)
    surroundings(c)
    surroundings_lookalikes(c)
    ids = [r["id"] for r in c.rows]
    assert len(ids) == len(set(ids))
    return c.rows


def render(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--check", action="store_true", help="exit 1 if the committed corpus is stale")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    rows = build()
    text = render(rows)
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is stale: run python {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    secrets = [r for r in rows if r["kind"] == "secret"]
    print(
        f"wrote {args.out}: {sum(len(r['secret']) for r in secrets)} secrets in {len(secrets)} rows "
        f"and {len({r['format'] for r in secrets})} formats; "
        f"{len(rows) - len(secrets)} look-alikes in {len({r['format'] for r in rows if r['kind'] == 'lookalike'})} formats"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
