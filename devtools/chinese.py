"""Chinese helpdesk replies for tests and benchmarks of the response kind: the replies by scenario
(the style of STC-3's Chinese customer-service dialogues), their words as jieba segments them, and
a word-vector table an organiser might upload for them."""

from __future__ import annotations

import numpy as np

from scoring.kinds.response.nlp import load_pipeline

# Chinese helpdesk replies (the style of STC-3's Chinese customer-service dialogues), by scenario.
ZH = {
    "delivery": ["很抱歉，您的订单已经发货了，预计明天送达。", "您好，包裹目前在北京的配送中心，两天内会送到。",
                 "非常抱歉让您久等了，快递员今天下午会给您打电话。"],
    "refund": ["退货商品到达仓库后，我们会在五个工作日内为您退款。",
               "您好，退款已经处理完毕，三到五天内会退回您的银行卡。", "很抱歉商品有问题，我们已经为您办理全额退款。"],
    "password": ["您可以在登录页面点击忘记密码，我们会把重置链接发到您的邮箱。",
                 "重置密码的邮件已经发送，请检查一下垃圾邮件。", "为了安全，连续输错五次密码后账号会被锁定十五分钟。"],
    "network": ["请先把路由器的电源拔掉三十秒，然后重新插上。", "您所在的地区正在进行网络维修，预计今天晚上恢复。",
                "我们检测了您的线路，没有发现问题，请试试用网线连接。"],
    "billing": ["很抱歉重复扣款了，多扣的费用会在三天内退还给您。", "本月的账单比较高，是因为优惠期已经结束了。",
                "这笔费用是您年度套餐的续费。"],
}


def zh_vectors(words: set[str], coverage: float = 1.0, seed: int = 0) -> bytes:
    """A word2vec text table an organiser might upload: each scenario's words near its own centre
    (the words of ``ZH`` segmented by jieba), keeping the share ``coverage`` of them."""
    rng = np.random.default_rng(seed)
    lines = []
    chosen = sorted(words)[: int(round(coverage * len(words)))]
    centres = {name: rng.normal(size=12) for name in ZH}
    for word in chosen:
        # A scenario's own words lie near its centre; words of several scenarios (您, 的) near none.
        owners = [name for name, replies in sorted(ZH.items()) if any(word in reply for reply in replies)]
        centre = centres[owners[0]] if len(owners) == 1 else np.zeros(12)
        lines.append(word + " " + " ".join(f"{value:.5f}" for value in centre + 0.5 * rng.normal(size=12)))
    return (f"{len(lines)} 12\n" + "\n".join(lines) + "\n").encode()


def zh_words() -> set[str]:
    nlp = load_pipeline("zh_jieba")
    return {token.text for replies in ZH.values() for doc in nlp.pipe(replies) for token in doc if not token.is_punct}
