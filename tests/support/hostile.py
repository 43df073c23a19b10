"""Values an argument may carry to trick an approver; every rendering must show them as text."""

from __future__ import annotations

import re

HOSTILE = {
    "channel": "<!channel>",
    "user": "<@U123>",
    "here": "@here",
    "markdown_link": "[click](https://evil.example)",
    "html": "<b>bold</b><script>alert(1)</script><img src=x onerror=alert(1)>",
    "rlo": "invoice\u202efdp.exe",
    "zero_width": "pay\u200bpal\u2060\ufeff",
    "ac_date": "{{DATE(2017-02-14T06:08:39Z, SHORT)}}",
    "backticks": "```\n*bold* <!here>\n```",
    "slack_link": "<https://evil.example|Open the approval page>",
    "entity": "&lt;!channel&gt; &amp;",
}
# Invisible and direction-changing characters: they must never reach a reader raw.
HIDDEN = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")
