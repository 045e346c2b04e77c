// AgentOwl: forward the mail of a Cloudflare Email Routing rule to a
// cloudflare-email binding (docs/channels.md). Set two Worker secrets:
//   AGENTOWL_INGRESS_URL  the binding's ingress URL (it carries its token)
//   AGENTOWL_SECRET       the binding's cfe_ secret
// The message is streamed as received; AgentOwl answers only once the event
// is stored. A refusal AgentOwl calls final bounces the message; anything
// else (the server unreachable, 429, 5xx) is a temporary failure, and the
// sending server retries.
export default {
  async email(message, env) {
    const res = await fetch(env.AGENTOWL_INGRESS_URL, {
      method: "POST",
      headers: {
        "Authorization": `Bearer ${env.AGENTOWL_SECRET}`,
        "Content-Type": "message/rfc822",
        "AgentOwl-Envelope-From": message.from,
        "AgentOwl-Envelope-To": message.to,
      },
      body: message.raw,
    });
    if (res.ok) {
      return;
    }
    const reason = `AgentOwl refused the message: ${res.status} ${await res.text()}`;
    if (res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429) {
      message.setReject(reason);
      return;
    }
    throw new Error(reason);
  },
};
