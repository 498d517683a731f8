"""What a question asks for, and whether a text gives it: answer types, parts, content words.

Pure functions, no I/O; shared by the offline answerer (:mod:`gcite.generate.extractive`,
which refuses a question no retrieved sentence can answer) and the verifier's second
dimension (:func:`answer_check`: does the answer answer the question).

* :func:`question_types` - the kinds of answer a question asks for (:data:`TYPES`): a sum
  of money (``money``), a duration or deadline (``duration``), how often
  (``frequency``), how many (``count``), a day (``date``), a clock time or date
  (``time``), a place
  (``place``), where to look something up (``lookup``: "在哪查" answered by "见工程部共享盘"),
  a phone number (``phone``), who / which office (``who``), a person's name
  (``person``), a name, brand or model (``name``, ``brand``, ``model``), a size or rate
  (``measure``, ``ratio``),
  the first thing to do (``first``: "第一步干嘛"),
  what to do (``procedure``: "怎么办", "怎么用"), how in general (``how``: "怎么申请",
  "会怎样"), which ones (``list``) and yes / no (``yesno``).
  A value is recognised by how Chinese questions ask for one, not by listed phrases: a
  noun of its kind (money: 费, 价, 金, 补贴...; contact: 电话, 座机, 微信...; maker: 牌子,
  厂家...) next to an interrogative (多少, 几, 哪, 什么, 谁家...), a verb of paying before
  "多少", a person's post before "叫什么 / 是谁".
  The first ones are *strict*: a text that does not contain such a value (a number
  with a money unit, a duration, a phone number...) does not answer, however close
  its topic (a "what to do" question needs a sentence that says to do something).
  ``how``, ``list`` and ``yesno`` only say what a good answer looks
  like (steps, an enumeration, a rule).
* :func:`gives` - whether a text contains a value of a type.
* :func:`question_parts` - a message holding several questions ("电梯困人怎么办，救援多久
  到？") cut into one part per question; clauses that ask nothing ("哎请问一下") stay
  with their neighbour.
* :func:`answer_check` - per part: its types, whether the answer gives them, and the
  share of the part's content words (IDF-weighted, :func:`gcite.knowledge.sparse.terms`,
  the one tokeniser) the answer holds.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gcite.knowledge.sparse import terms
from gcite.verify.sanctions import law_articles
from gcite.verify.scope import SentenceFilter, in_scope
from gcite.verify.text import bigram_coverage, sentences

#: word -> the written forms that count as the word (a colloquial word's synonyms).
Synonyms = Mapping[str, tuple[str, ...]]

#: Colloquial words and the written words handbooks and regulations use for them. A
#: question word counts as found when one of its written forms is: in the offline
#: answerer's picking rules and in the second dimension (:func:`word_cover`).
SYNONYMS: Synonyms = {
    "晚上": ("夜间",),
    "夜里": ("夜间",),
    "夜班": ("夜间",),
    "白天": ("日间",),
    "白班": ("日间",),
    "钟头": ("小时",),
    "一把手": ("主要负责人",),
    "留": ("保存", "保留"),
    "没": ("未",),
    "没有": ("未",),
    "客人": ("访客",),
    "来访": ("访客",),
    "坏": ("损坏", "故障"),
    "坏了": ("损坏", "故障"),
    "关人": ("困人",),
    "老是": ("重复",),
    "订": ("预订", "预约"),
    "停": ("停放",),
    "着火": ("火情", "火灾"),
    "失火": ("火情", "火灾"),
    "开会": ("会议",),
    "刷脸": ("人脸",),
    "师傅": ("人员",),
    "钱": ("费用", "经费"),
    "电话": ("热线",),
    "修好": ("修复", "处理完毕"),
    "上楼": ("楼层",),
    "手续": ("登记", "许可", "审批", "办理"),
    "进楼": ("进入",),
}

#: A number in digits or Chinese numerals. Each run starts where the run starts (a
#: lookbehind): a match begun inside a long run of digits would rescan it from every
#: position, quadratic in its length.
_NUM = (
    r"(?:(?<!\d)\d+(?:\.\d+)?"
    r"|(?<![一二两三四五六七八九十百千万半几])[一二两三四五六七八九十百千万半几]+)"
)
#: Units after a number that make it something else than a count (a duration, a clock
#: time, a sum of money, a share, a size).
_NOT_COUNTED = (
    r"秒|分钟|分|小时|个小时|钟头|天|日|个工作日|工作日|周|星期|个月|月|年|点|元|块钱|%|米|公斤|千克"
    r"|kg|吨|升|平方|寸|厘米|毫米|cm|mm|kw|千瓦|瓦|度|℃"
)
_TIME_UNIT = r"(?:秒|分钟|分|小时|个小时|钟头|天|日|个工作日|工作日|周|星期|个月|月|年|季度)"


#: Nouns of money (by their morphemes): a charge (费, not 免费 / 消费), a price, a wage,
#: a deposit or rent (…金), an allowance, a fine or compensation. Such a noun asked
#: about asks for an amount.
_MONEY_NOUN = (
    r"(?<![免消经])费|(?<![评代])价|钱|工资|薪水|薪资|月薪|金(?!属|额外)|补贴|补助|津贴"
    r"|罚款|赔款|赔偿|报酬|成本|预算"
)

#: Words for a person by post, duty or kind (a name asked of one is a person's name).
_PERSON = (
    r"主管|经理|讲师|老师|队长|组长|班长|管理员|负责人|联系人|值班员|人员|员工|保安|保洁|阿姨|师傅"
    r"|客服|民警|警官|司机|工程师|电工|领导|老板|同事|那个人|这个人|的人"
)
#: Common Chinese surnames (the first character of a person's name).
_SURNAMES = (
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何林罗郑梁谢宋唐许韩冯邓曹彭曾萧田董潘袁蔡"
    "蒋余于杜叶程魏苏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方邹熊白孟秦邱侯江"
    "尹薛闫段雷龙黎史陶贺顾毛郝龚邵万钱严覃武戴莫孔向汤"
)

#: A text saying what to do: a step, an instruction, an action.
_PROCEDURE_ANSWER = re.compile(
    r"第[一二三四五六七八九十\d]+步|首先|然后|随后|再|立即|立刻|马上|按下|按|拨打|撤离|通知|联系"
    r"|上报|报修|登记|通过|扫描|出示|选择|填写|提交|关闭|打开|使用|须|应|请|先"
)


@dataclass(frozen=True)
class AskType:
    """One answer type: ``asked`` matches a question asking for it, ``answer`` a text
    giving it; ``strict``: a text without such a value does not answer."""

    name: str
    asked: re.Pattern[str]
    answer: re.Pattern[str]
    strict: bool = True
    #: A text saying the value is set elsewhere ("超出部分按…计费"): such a text gives
    #: the type only with a ``value`` of its own (an amount), not by ``answer``'s words
    #: ("免费" for another part).
    withheld: re.Pattern[str] | None = None
    value: re.Pattern[str] | None = None


def _re(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


#: The answer types, most specific first (see the module docstring).
TYPES: tuple[AskType, ...] = (
    AskType(
        "money",
        _re(
            r"多少钱|几块钱|几块|什么价|啥价|价格|价钱|价位|收费多少|多少费用|费用多少|费用是多少"
            r"|罚多少|罚款多少|罚款.{0,4}多少|多少罚款|赔多少|补贴|补助|津贴|多少元|工资多少|贵不贵"
            # whether something is charged for: answered by an amount or "free"
            r"|收钱|要钱|收费|收不收|免费吗"
            # a noun of money (a charge, a wage, a deposit, a rent, a price) before an
            # interrogative: "押金交多少", "工本费是几块" ("免费能用多少个小时" asks hours)
            rf"|(?:{_MONEY_NOUN})[^，。？?；;\s]{{0,6}}(?:多少|几|怎么算|如何计算|怎么计算|咋算)"
            r"(?!\s*个?\s*(?:天|小时|钟头|分钟|年|月|次|人|工作日|星期|礼拜))"
            # an interrogative before a noun of money: "交多少押金", "多少工本费"
            rf"|(?:多少|几)[^，。？?；;\s]{{0,2}}(?:{_MONEY_NOUN})"
            # a verb of paying or earning before "多少 / 几": "交多少", "挣几千"
            r"|(?:交|缴|付|花|赔|扣|罚|挣|赚|报销|退|收)了?(?:多少|几[千百万块])"
            r"(?!\s*个?\s*(?:天|小时|钟头|分钟|年|月|次|人|工作日|星期|礼拜|米|公斤|度|时间|工夫|功夫|精力))"
            # things counted, not a sum ("收多少件", "交多少份材料", "能收多少辆车")
            r"(?!\s*[个件份张条页箱包辆台位名间部具套把根只])"
            # an amount in round figures: "几千", "几百块"
            r"|几[千百万](?:块|元)?(?![\u4e00-\u9fff])"
        ),
        # an amount, or free of charge (a charge "by the rates" names no amount)
        _re(
            rf"{_NUM}\s*(?:万|千)?\s*(?:元|块钱?)|[¥￥]\s*\d|免费|不收费|不另收|无偿|不收取|不得收取"
        ),
        withheld=_re(r"按[^，。；]{0,12}(?:计费|收取)|另行(?:计费|收费|收取)"),
        value=_re(rf"{_NUM}\s*(?:万|千)?\s*(?:元|块钱?)|[¥￥]\s*\d"),
    ),
    AskType(
        "frequency",
        _re(
            r"(?:多久|多长时间|隔多久|(?:多少|几)\s*个?\s*(?:天|小时|钟头|分钟|月|周|星期))"
            r".{0,8}(?:一次|一回|一趟|一圈)"
            r"|几次|多少次|多频繁|多勤|频率|多久.{0,3}(?:转|巡|查|检|换|洗|保养|清洗|演练)"
        ),
        _re(
            rf"每\s*{_NUM}?\s*(?:个)?{_TIME_UNIT}|每(?:年|月|周|天|日|班|季度|半年)|{_NUM}\s*次"
            r"|一次|每隔|定期"
        ),
    ),
    AskType(
        "duration",
        _re(
            r"多久|多长时间|多少时间|几天|几个?小时|几个钟|几分钟|多少(?:天|日|小时|分钟|个工作日|个月|年)"
            r"|几个月|几年|几个工作日|时限|期限|有效期|多快|提前多|保存多|保留多|多长[？?]?$|任期"
        ),
        _re(rf"{_NUM}\s*{_TIME_UNIT}|当天|当日|立即|立刻|马上|随时|长期|永久|之日起|以内|之内"),
    ),
    AskType(
        "year",
        # a year asked ("哪年"), not how many years ("几年": a duration)
        _re(r"哪一?年|几几年|什么年份|哪个年份|年份"),
        _re(r"(?:[1１][89８９]|[2２][0０])\d{2}\s*年|[今去前明]年|同年|当年"),
    ),
    AskType(
        "date",
        # a day asked: a date, a weekday, a day of the month answers, not "每月" alone
        _re(r"哪天|哪一天|几号|几月几|几月份|哪个月|什么日子|日期|星期几|周几|礼拜几"),
        _re(
            r"(?<!\d)\d+\s*[月日号]|(?<![一二三四五六七八九十])[一二三四五六七八九十]+\s*月|[周礼拜][一二三四五六日末天]|星期"
            r"|每(?:年|月|周)[^，。；]{0,6}(?:日|号|周[一二三四五六日])|节假日|工作日|之日起"
        ),
    ),
    AskType(
        "time",
        _re(
            r"几点|什么时候|啥时候|何时|哪天|几号|几月|什么时间|哪个时间|时间段|开到几"
            r"|哪一天|什么日子|日期"
        ),
        _re(
            r"\d{1,2}\s*[:：]\s*\d{2}|\d{1,2}\s*点|(?<![一二三四五六七八九十])[一二三四五六七八九十]+\s*点"
            r"|(?<!\d)\d+\s*月|周[一二三四五六日末]"
            r"|星期|工作日|节假日|上午|下午|晚上|夜间|凌晨|白天|日间|\d{4}\s*年|之日起|之前|以前|之后"
            r"|以后|前|后|期间|时|当天|每(?:年|月|周|天|日)"
        ),
    ),
    AskType(
        "phone",
        _re(
            r"(?:电话|号码|热线|手机|分机|座机|微信|联系方式|联络方式)[^，。？?；;\n]{0,6}"
            r"(?:多少|是啥|是什么|几号|啥|给我|给个|发我|留个|留一个)|打(?:哪个|什么|几号)"
            r"|拨(?:哪个|什么|几号)|电话号|联系电话|联系方式|号码|微信号"
        ),
        # digits of a number, not a year, a model code or a measured value ("CH-1200R",
        # "1600kW", "2026 年")
        _re(
            r"(?<![a-z\d.-])\d{3,}(?:[-\s]\d{3,})*(?![\d.]|[a-z]|\s*(?:年|月|日|号|元|块|米|人|个|台|部"
            r"|层|次|冷吨|公斤|千克|吨|升|小时|分钟|秒|天|平方|%))"
        ),
    ),
    AskType(
        "count",
        _re(
            r"(?<![好哪那这])(?:几|多少)\s*(?:个(?!\s*(?:小时|钟|月|工作日|星期|礼拜))|名|人|位|间|部|台|具|条|处|层|套|辆|项|组|格|家|座|种|块|把|路|条线|根)"
            r"|容纳多少|能坐多少|坐多少|多少人|有多少|一共多少|总共多少|共多少"
        ),
        _re(
            # not a code such as a floor "B1" or a line "A3"
            # not an ordinal ("第 3 格")
            rf"(?<![a-z\d第])(?<!第\s)(?:{_NUM}|双)\s*(?:个(?!\s*(?:月|小时|钟头|工作日|星期))|名|人|位|间|部|台|具|条|处"
            # a floor before a place ("1 层大堂") is where, not how many
            r"|层(?![\u4e00-\u9fff])|套|辆|项|组|格|家|座|种|块|把|路|根|冷吨)"
            # a bare number, unless it states a duration, a time, a sum, a share or a size,
            # is an ordinal, part of a code ("CH-1200R") or a floor before a place
            rf"|(?<![a-z\d第-])(?<!第\s)\d+(?![\d.:：-]|[a-z]|\s*(?:{_NOT_COUNTED}|层[\u4e00-\u9fff]))"
        ),
    ),
    AskType(
        "measure",
        _re(
            r"多大|多重|多少公斤|多高|(?<!时间)(?<!时)多长(?!时间)|多宽|多远|多厚|多少米|尺寸|面积|容量|功率|多少瓦"
            r"|多少千瓦|多少度|温度[^，。？?]{0,4}(?:多少|几度|多高|多低)|多少吨|多少升"
            r"|(?:多少|几)\s*(?:寸|英寸|升|立方|平米|平方米|厘米|毫米)"
        ),
        _re(
            rf"{_NUM}\s*(?:公斤|kg|千克|米|m|平方|㎡|kw|千瓦|瓦|吨|度|℃|升|l|人|寸|厘米|cm|毫米|周岁|岁)"
        ),
    ),
    AskType(
        "ratio",
        _re(r"比例|百分之|多少比例|几成|占多少|百分比|几折|打折"),
        _re(r"\d\s*%|百分之|分之|\d\s*成|[一二三四五六七八九]成|比例|折"),
    ),
    AskType(
        "lookup",
        _re(r"(?:在哪|哪里|哪儿|去哪|到哪|哪能|从哪)(?:里|儿)?(?:能|可以)?(?:查|看|找|获取|下载)"),
        _re(r"见|查阅|查询|查看|登录|公布|公示|张贴|共享盘|系统|平台|网站|小程序|页面"),
    ),
    AskType(
        "place",
        _re(
            r"哪里|在哪|哪儿|哪边|什么地方|啥地方|什么位置|位置在|地点|放哪|停哪|站哪|去哪|几楼"
            # a verb of placing before 哪: "化验单贴哪", "钥匙搁哪了" (the verb stays one of
            # the question's words)
            # (not which ones: "存哪些画面", "贴哪几张")
            r"|(?<=[贴挂装搁摆存锁])哪(?![些几种类样])"
            r"|哪层|哪一层|哪个门|哪个口|在几层|哪个房间|哪个区"
        ),
        _re(
            r"位于|设在|设于|存放|放在|放置|停放|集合点|(?<!\d)\d+\s*层|(?<![一二三四五六七八九十])[一二三四五六七八九十]+\s*层|(?<![a-z])[bＢ]\d"
            r"|[东西南北]侧|[东西南北]门|大堂|广场|机房|上风|下风|方向|附近|旁边|对面"
            # a verb of placing before 在 ("张贴在轿厢内"; not a time: "装在 3 天内")
            r"|(?:贴|装|挂|停|摆|搁)在(?![^，。；]{0,4}\d)"
            r"|(?:在|于|到|至|去)[^，。；]{0,12}(?:室|房|厅|柜|库|区|门|台|处|楼|层|侧|车位|中心)"
            # a locative phrase: "在值班日志上签字", "张贴在轿厢内" (not a span of time or
            # a threshold: "在24小时内上报", "在三个工作日内", "在60度以上时")
            r"|在(?![^，。；在]{0,10}?(?:小时|分钟|时间|期限|期间|[日天周月年以])[上内])"
            r"[^，。；在]{1,10}(?:上|内)(?=[\u4e00-\u9fff])"
        ),
    ),
    AskType(
        "level",
        _re(r"第几|几级|哪一级|哪级|什么级别|哪个级别|哪个等级|什么等级"),
        # a level, or an ordinal for "第几" ("第 3 格")
        _re(
            r"(?:(?<![一二三四五六七八九十\d])[一二三四五六七八九十\d]+|(?<![ⅠⅡⅢⅣ])[ⅠⅡⅢⅣ]+)\s*级|级别|[红橙黄蓝]色|第\s*(?:\d+|[一二三四五六七八九十]+)"
        ),
    ),
    AskType(
        "penalty",
        _re(r"怎么罚|如何处罚|怎么处罚|什么处罚|罚不罚|会被罚|被罚|处罚|承担什么责任|什么责任"),
        _re(r"罚款|处罚|警告|拘留|吊销|责令|追究|处分|没收|赔偿|责任"),
    ),
    AskType(
        "code",
        # the code's value asked ("密码是多少"), not a question about a code ("密码多久改")
        _re(r"(?:密码|验证码|取件码|口令)[^，。？?\s]{0,4}?(?:是|为)?\s*(?:多少|啥|什么|几)"),
        _re(r"(?:密码|验证码|取件码|口令)\s*(?:是|为|[:：])\s*\S|\d{4,}"),
    ),
    AskType(
        "brand",
        # the maker asked: a word for a brand, a maker or a supplier, or "哪 / 什么 /
        # 谁家" before one, or where it is made ("哪里产的", "哪国产"; not "哪里产生")
        _re(
            r"牌子|品牌|厂家|厂商|哪家公司|哪个公司|什么公司|啥公司|供应商|哪家的|谁家的?"
            r"|(?:哪|什么|啥)(?:家|个)?\s*(?:厂|企业)|(?:哪|什么|啥)(?:家|个)[\u4e00-\u9fff]{1,4}(?:公司|厂|企业)"
            r"|生产商|制造商|(?:哪里|哪儿|哪国|什么地方)产(?![生品权业])"
            r"|(?:哪家|谁家|什么公司|哪个公司)\S{0,3}(?:做|生产|制造|装|供|造)"
        ),
        _re(r"品牌|牌子|厂家|厂商|公司|集团|有限"),
    ),
    AskType(
        "model",
        _re(r"型号|规格|哪一?款|什么款|啥款|什么型的|啥型的|哪个版本|什么版本"),
        _re(r"型号|规格|款|[a-z]{1,5}-?\d{2,}"),
    ),
    AskType(
        "person",
        # a person's name asked: a post, a duty or a person named, then who or what
        # they are called ("主管是谁", "值班的保安叫啥"), or how one addresses them
        _re(
            rf"(?:{_PERSON})[^，。？?；;\s]{{0,4}}(?:叫什么|叫啥|名字|姓名|是谁|是哪位|姓什么|姓啥)"
            # who did it, and the name asked ("谁签字批准的 叫啥名")
            r"|谁[^，。？?；;]{0,8}(?:叫什么|叫啥|名字|姓名)"
            r"|姓什么|姓啥|贵姓|怎么称呼|如何称呼|称呼"
        ),
        _re(
            rf"(?:姓名|联系人|负责人|名叫|叫做|名为)\s*[:：为是]?\s*[{_SURNAMES}][\u4e00-\u9fff]{{1,2}}"
            # a surname (and a given name) with a form of address ("王先生", "李明女士")
            rf"|[{_SURNAMES}][\u4e00-\u9fff]?(?:先生|女士|师傅|老师)"
            # a name said to be the person's, ending its clause ("主管是张伟。", "叫王强")
            rf"|(?:是|为|叫)\s*[{_SURNAMES}][\u4e00-\u9fff]{{1,2}}(?<![的了])(?=[，。；,;！!？?、\s]|$)"
            # a surname with a post, as one refers to a person ("由张经理负责")
            rf"|(?:是|为|由|找|联系)\s*[{_SURNAMES}](?:经理|主管|主任|队长|组长|班长|部长|科长)"
        ),
    ),
    AskType(
        "name",
        _re(r"叫什么名|名字|姓名|叫啥|叫什么|名称"),
        # "姓名" given as a value ("姓名：…"), not a form field ("填写访客姓名")
        # or a name in quotation marks ("小程序“明湖服务”")
        _re(
            r"姓名\s*[:：为是]|名为|名叫|称为|简称|[\u4e00-\u9fff](?:先生|女士|师傅)|[厅馆]"
            r"|[“\"「『][^”\"」』\s]{2,12}[”\"」』]"
        ),
    ),
    AskType(
        "who",
        _re(
            r"找谁|联系谁|问谁|谁负责|谁来|谁出|谁管|谁批|谁审|谁签|谁承担|由谁|是谁|谁[？?]?$|打给谁"
            r"|哪个部门|什么部门|哪个单位|什么单位|谁"
        ),
        _re(
            r"部|主管|经理|负责人|人员|单位|企业|机关|中心|服务台|业主|租户|物业|机构|部门|政府|委员会|公司"
            r"|派出所|员|者|方|人|师|长|队|组|科|局|所|会|由.{1,12}(?:负责|承担|组织|审批|批准|签发)"
        ),
    ),
    AskType(
        "first",
        # the first thing to do asked ("第一步干嘛", "先拔啥"): answered by a first step
        _re(
            r"第一步|第一件事|头一件事|首先(?:要|得|该)?(?:干|做|弄)"
            r"|先(?:要|得|该)?(?:干|做|弄|拔|按|拉|关|开|打)(?:啥|嘛|什么|哪)"
        ),
        # or what to do before it ("施工前…委托设计单位", "事先告知")
        _re(r"第一|首先|先|前|预先"),
    ),
    AskType(
        "procedure",
        # what to do: an answer says it (a step, an instruction), else it does not answer
        _re(
            r"怎么办|咋办|咋整|怎么处理|如何处理|怎么做|怎么弄|咋弄|该干啥|该做什么|要做什么"
            r"|该怎么|应该怎么|怎么用|如何用|怎样用|咋用|怎么使用|如何使用|怎么操作|如何操作|步骤"
        ),
        _PROCEDURE_ANSWER,
    ),
    AskType(
        "how",
        # "how" in general ("怎么申请", "会怎样"): a good answer often has steps, not always
        _re(
            r"流程|怎么报|怎么登记|咋登记|怎么预订|怎么订|咋订|怎么申请|如何申请|怎么走|怎么才能"
            r"|如何|怎样|怎么"
        ),
        _PROCEDURE_ANSWER,
        strict=False,
    ),
    AskType(
        "list",
        _re(r"哪些|有什么|有啥|都有|包括什么|包括哪|几类|哪几"),
        _re(r"、|：|:|包括|分为|以下"),
        strict=False,
    ),
    AskType(
        "yesno",
        _re(
            r"吗[？?。！!\s]*$|能不能|可不可以|可以不|是不是|是否|有没有|要不要|会不会|行不行|需不需要"
            r"|用不用|让不让|准不准|算不算|能否|可否|得不得"
        ),
        _re(r"可以|可|能|不得|禁止|严禁|须|必须|应|不能|不可|允许|无需|不需要|需|是|有|算|视为|不"),
        strict=False,
    ),
)
_BY_NAME = {t.name: t for t in TYPES}
#: Types that, when asked, make a wider one redundant ("多久一次" asks how often, not
#: how long; "电话多少" asks for a phone number, not a count).
_SHADOWS = {
    "frequency": ("duration", "count", "time"),
    # "先打哪个电话" asks the number, "先开哪个门" the door: not a first step
    "phone": ("count", "who", "procedure", "how", "date", "time", "first"),
    "place": ("first",),
    "procedure": ("how",),
    "first": ("procedure", "how"),
    "money": ("count", "penalty"),
    "ratio": ("money",),
    "penalty": ("procedure", "how"),
    "measure": ("count",),
    # "第几格" asks for an ordinal, not how many
    "level": ("count",),
    "duration": ("time",),
    "brand": ("name", "place", "who"),
    "name": ("who",),
    "person": ("name", "who", "how"),
    "date": ("time", "place"),
    "year": ("time", "date", "duration"),
    "lookup": ("place", "phone"),
}


#: A name written on a form ("填写访客姓名", "登记访客的名字"): what is done with it is
#: asked ("谁负责填写访客姓名" asks who), not what anyone is called.
_FORM_FIELD_RE = re.compile(
    r"((?:填|写|登记|签|录入|输入|留|核对|核实)[^，。？?；;\s]{0,4})(?:名字|姓名)"
)


def question_types(question: str) -> tuple[str, ...]:
    """The names of the answer types ``question`` asks for, in :data:`TYPES` order."""
    question = _FORM_FIELD_RE.sub(r"\1信息", question)
    found = [t.name for t in TYPES if t.asked.search(question)]
    shadowed = {name for asked in found for name in _SHADOWS.get(asked, ())}
    return tuple(name for name in found if name not in shadowed)


def strict_types(types: tuple[str, ...]) -> tuple[str, ...]:
    """The strict ones among ``types`` (a text lacking their value does not answer)."""
    return tuple(name for name in types if _BY_NAME[name].strict)


def gives(type_name: str, text: str) -> bool:
    """Whether ``text`` contains a value of the type ``type_name`` (see :data:`TYPES`;
    a text saying the value is set elsewhere needs a value of its own: an amount)."""
    kind = _BY_NAME[type_name]
    if kind.withheld is not None and kind.value is not None and kind.withheld.search(text):
        return bool(kind.value.search(text))
    return bool(kind.answer.search(text))


def gives_any(types: tuple[str, ...], text: str) -> bool:
    """Whether ``text`` gives one of the strict ``types`` (True when none is strict)."""
    strict = strict_types(types)
    return not strict or any(gives(name, text) for name in strict)


#: Duration units by scale (seconds ... years): a question asking in one unit ("几年")
#: is not answered by a duration two or more steps away ("8 到 10 秒").
_SCALES: tuple[tuple[int, str], ...] = (
    (0, "秒"),
    (1, "分钟|分"),
    (2, "个小时|小时|钟头|个钟"),
    (3, "个工作日|工作日|天|日"),
    (4, "个星期|星期|周|礼拜"),
    (5, "个月|月|季度"),
    (6, "年"),
)
_SCALE_UNIT = "|".join(units for _, units in _SCALES)
# "那几天" / "前几天" name a span, they do not ask for one
_ASKED_SPAN_RE = re.compile(rf"(?<![那这前后头])(?:几|多少)\s*(?:{_SCALE_UNIT})")
_GIVEN_SPAN_RE = re.compile(
    rf"(?:(?<!\d)\d+(?:\.\d+)?|(?<![一二两三四五六七八九十百半])[一二两三四五六七八九十百半]+)"
    rf"\s*(?:{_SCALE_UNIT})"
)
#: Words that state a duration without a number, and their scale.
_GIVEN_WORDS: tuple[tuple[int, str], ...] = ((1, "立即|立刻|马上"), (3, "当天|当日"))
#: Measure words of a count ("几套", "多少部"); a count asked in one needs a count in the
#: same or an interchangeable one ("部" / "台", the words for people). "个" is generic.
_MEASURES = "名位人部台具间条处套辆项组格座块把根"
_ASKED_COUNT_RE = re.compile(rf"(?:几|多少)\s*([{_MEASURES}])")
_SAME_MEASURE = ("名位人个", "部台")


def _scale(span: str) -> int:
    """The scale of a duration span ("8 秒" -> 0, "几年" -> 6), by its unit (the last
    unit of :data:`_SCALES` it ends with; "个小时" before "小时")."""
    for scale, units in _SCALES:
        if re.search(rf"(?:{units})$", span):
            return scale
    return -1


_LENGTH_UNITS = r"米|m\b|寸|厘米|cm|毫米|mm|公里|km"
#: A size asked in one dimension (a length, a weight, an area, a power) and the units
#: that state it: "多大尺寸" is not answered by "可容纳 60 人", "多远" not by "4 公斤".
_DIMENSIONS: tuple[tuple[re.Pattern[str], re.Pattern[str]], ...] = (
    (
        _re(
            r"尺寸|(?<!时间)(?<!时)多长(?!时间)|多宽|多高|多远|多厚|多少米|(?:多少|几)\s*(?:寸|英寸|厘米|毫米)"
        ),
        _re(_LENGTH_UNITS),
    ),
    (_re(r"(?:多少|几)\s*(?:升|立方)|容积"), _re(r"升|l\b|立方|m³")),
    (_re(r"多重|重量|多少公斤|多少斤|多少吨"), _re(r"公斤|kg|千克|斤|吨|克")),
    (_re(r"面积|多少平"), _re(r"平方|㎡|亩")),
    (_re(r"功率|多少瓦|多少千瓦"), _re(r"瓦|kw|w\b")),
)


def _dimension_agrees(question: str, text: str) -> bool:
    """Whether ``text`` states a size in the dimension ``question`` asks (True when it
    asks none: "多大" alone may be a capacity)."""
    return all(units.search(text) for asked, units in _DIMENSIONS if asked.search(question))


#: An age in years ("不满十六周岁", "年满 18 岁"), and a question about a person's
#: age: "多大" of a child asks an age, "多大" of a room or a machine a size.
_AGE_RE = re.compile(rf"{_NUM}\s*周?岁")
_PERSON_ASKED_RE = re.compile(
    r"岁|年龄|年纪|孩|儿童|未成年|老人|学生|宝宝|婴|人|游客|乘客|访客|顾客|员工|职工"
)


def _age_agrees(question: str, text: str) -> bool:
    """False when ``question`` asks a size but of no person and the only sizes ``text``
    states are ages."""
    if not _AGE_RE.search(text) or _PERSON_ASKED_RE.search(question):
        return True
    if "measure" not in question_types(question):
        return True
    return gives("measure", _AGE_RE.sub("", text))


#: A fine or damages asked ("罚多少", "赔多少"): any sum answers; else a sum asked (a
#: price, a fee, a rent) is not answered by a fine.
_PENALTY_ASKED_RE = re.compile(r"罚|赔")
#: A sum that is a fine: the word for one follows it within a few characters ("处五千元
#: 以上五万元以下罚款").
_FINE_RE = re.compile(rf"{_NUM}\s*(?:万|千)?\s*元(?=[^，。；;,\n]{{0,8}}(?:罚款|罚金))")
_SUM_RE = re.compile(rf"{_NUM}\s*(?:万|千)?\s*元")


def _charge_agrees(question: str, text: str) -> bool:
    """False when ``question`` asks for a sum that is not a fine (a price, a fee, a rent)
    and every sum ``text`` states is a fine."""
    if _PENALTY_ASKED_RE.search(question) or "money" not in question_types(question):
        return True
    sums = len(_SUM_RE.findall(text))
    return not sums or len(_FINE_RE.findall(text)) < sums


#: "几个 / 多少个" and the thing counted after it ("多少个摄像头", "几个打卡的点"), not
#: a duration ("几个小时"), which ones ("哪几个") nor those ("那几个": a demonstrative).
_COUNTED_THING_RE = re.compile(
    r"(?<![哪那这])(?:几|多少)\s*个\s*(?!小时|钟|月|工作日|星期|礼拜)([\u4e00-\u9fff]{1,6})"
)
_TRAILING_RE = re.compile(r"(?:呀|啊|啦|吗|呢|了|吧|左右|以上|以下|大概|一共|总共)+$")
_SENTENCE_RE = re.compile(r"[^。；;！!？?\n]+")


def counted_thing(question: str) -> tuple[str, ...]:
    """The words naming the thing a "几个 / 多少个" question counts, after its last "的":
    its leading content words (at most two: "多少个监控探头" -> 监控, 探头), or its first
    character when that is a word of its own ("几个人值班" -> 人); () when it counts
    nothing named."""
    match = _COUNTED_THING_RE.search(question)
    if match is None:
        return ()
    thing = _TRAILING_RE.sub("", match.group(1)).split("的")[-1]
    if not thing:
        return ()
    words: list[str] = []
    rest = thing
    for word in terms(thing, search=False):
        if not rest.startswith(word) or len(words) == 2:
            break
        words.append(word)
        rest = rest[len(word) :]
    return tuple(words) or (thing[0],)


def _named(word: str, sentence: str) -> bool:
    """``word`` (or a synonym) in ``sentence``, or - for a longer word - its first and
    last characters close together in order ("消火栓" in "消防栓")."""
    if _word_found(word, sentence) >= 1.0:
        return True
    first = sentence.find(word[0])
    return len(word) > 2 and first >= 0 and word[-1] in sentence[first + 1 : first + len(word) + 1]


def _thing_counted(question: str, text: str) -> bool:
    """Whether a sentence of ``text`` gives a count and names the thing the question
    counts (True when it names none): "双人值守" does not count cameras."""
    thing = counted_thing(question)
    if not thing:
        return True
    count = _BY_NAME["count"].answer
    return any(
        count.search(sentence) and all(_named(word, sentence.lower()) for word in thing)
        for sentence in _SENTENCE_RE.findall(text)
    )


#: A question asking a spacing ("隔多远放一个", "每隔几米"): a size given per unit ("每 30
#: 米设 1 具") answers it. Another question asking a size is not answered by a spacing
#: ("离火多远" by "每 30 米设 1 具"). (Durations are left alone: "多久轮岗" asks how often
#: as well as how long, and "每 12 小时轮换一次" answers it.)
_PER_ASKED_RE = re.compile(
    r"隔|间距|相距|之间|每\s*(?:隔\s*)?(?:多|几)|(?:多远|多少米|几米).{0,6}一\s*[个具处台根]"
)
_PER_VALUE_RE = re.compile(rf"每\s*(?:隔\s*)?{_NUM}\s*(?:{_LENGTH_UNITS})")


def _per_agrees(question: str, text: str) -> bool:
    """False when ``question`` asks a size but no spacing, and ``text`` gives a size only
    as a spacing ("每 30 米")."""
    if _PER_ASKED_RE.search(question) or "measure" not in question_types(question):
        return True
    bare = _PER_VALUE_RE.sub("，", text)
    return bare == text or (gives("measure", bare) and _dimension_agrees(question, bare))


#: An alternative question ("用的是海康的还是大华的"): 还是 between two options of one
#: clause - not "still" before a verb ("还是要登记吗").
_ALTERNATIVE_RE = re.compile(
    r"([^，,。？?；;！!\s]{2,12})还是(?![要得需会能可应该再先])([^，,。？?；;！!\s]{1,12})"
)


def _alternative_named(question: str, text: str) -> bool:
    """False when ``question`` asks which of two options ("A 还是 B") and ``text`` names
    neither: the last content word before 还是 nor a content word after it."""
    match = _ALTERNATIVE_RE.search(question) if "还是" in question else None
    if match is None or "吗" in question[match.end() :]:
        return True
    before = [w for w in terms(match.group(1), search=False) if not asks_only(w)]
    options = before[-1:] + [w for w in terms(match.group(2), search=False) if not asks_only(w)]
    low = text.lower()
    return not options or any(_word_found(word, low) >= 1.0 for word in options)


def units_agree(question: str, text: str) -> bool:
    """Whether ``text`` gives a value in the unit ``question`` asks in, when it asks in
    one: a duration asked in a unit ("几年", "多少分钟") and stated in ``text`` only two or
    more scale steps away (seconds for years) does not answer; nor does a count asked in
    a measure word ("几套") stated only in another ("两名"), nor a size asked in one
    dimension ("尺寸", "多远", "多重") without a unit of it, nor a thing's size by ages
    alone, nor a price, a fee or a rent asked by fines alone. True when the question
    names no unit, or ``text`` states no duration of its own (for durations)."""
    asked = _ASKED_SPAN_RE.search(question)
    if asked is not None:
        given = [_scale(m.group(0)) for m in _GIVEN_SPAN_RE.finditer(text)]
        given += [scale for scale, words in _GIVEN_WORDS if re.search(words, text)]
        want = _scale(asked.group(0))
        if given and all(abs(scale - want) >= 2 for scale in given):
            return False
    if not _dimension_agrees(question, text) or not _charge_agrees(question, text):
        return False
    if not _age_agrees(question, text) or not _per_agrees(question, text):
        return False
    if not _alternative_named(question, text):
        return False
    counted = _ASKED_COUNT_RE.search(question)
    if counted is not None:
        measure = counted.group(1)
        same = next((group for group in _SAME_MEASURE if measure in group), measure)
        # "2 个工作日" is a span, not two of anything
        span = r"(?!\s*(?:小时|钟头|月|工作日|星期|礼拜))"
        number = r"(?<!\d)\d+|(?<![一二两三四五六七八九十百千])[一二两三四五六七八九十百千]+"
        if not re.search(rf"(?:{number})\s*[{same}]{span}", text):
            return False
    return _thing_counted(question, text)


_PIECE_RE = re.compile(r"[^？?；;，,。！!\n]+[？?；;，,。！!\n]*")
_JOINER_RE = re.compile(r"^(?:还有|另外|以及|并且|而且|同时|顺便问一?下|再问一?下|那)")
#: A part needs at least this many characters of its own (a shorter typed clause, "几个",
#: stays with its neighbour).
MIN_PART_CHARS = 3


#: An interrogative word in a clause: it asks something even when no answer type says
#: what ("走的时候要还什么").
_ASKS_WORD_RE = re.compile(r"什么|啥|谁|哪|多少|怎么|咋|如何|吗[？?。！!\s]*$")


def _asks(piece: str) -> bool:
    return (
        bool(question_types(piece))
        or piece.rstrip().endswith(("？", "?"))
        or bool(_ASKS_WORD_RE.search(piece))
    )


def question_parts(question: str) -> list[str]:
    """The questions a message asks, one string per part, in order (at least one).

    The message is cut at ？?；;，,。！! and at "还有 / 另外 / 以及 …"; a piece that
    asks something (an answer type, or a question mark) starts a new part when the part
    before it asks something too; other pieces join the part before them (the first
    ones the part after them). A message asking one thing is one part, unchanged.
    """
    pieces = [p.strip() for p in _PIECE_RE.findall(question) if p.strip()]
    parts: list[str] = []
    asked: list[bool] = []
    for piece in pieces:
        bare = _JOINER_RE.sub("", piece).strip("？?；;，,。！! ")
        asks = _asks(piece) and len(bare) >= MIN_PART_CHARS
        if parts and (not asks or not asked[-1]):
            parts[-1] += piece
            asked[-1] = asked[-1] or asks
            continue
        parts.append(piece)
        asked.append(asks)
    if len(parts) <= 1:
        return [question.strip()] if question.strip() else []
    return parts


#: Words that ask rather than say (removed with the answer-type phrases before the
#: question's content words are taken).
_ASKING_RE = re.compile(
    r"什么|啥|哪|怎么|咋|怎样|如何|吗|呢|吧|啊|呀|哈|嘛|多少|几|多久|多长|会怎样|怎么样|请问|一下"
    r"|那个|哎|嗯|是不是|能不能|可不可以|有没有|要不要|会不会|行不行"
)


#: Interrogative morphemes: a word made of one and at most one other character ("哪查",
#: "几个", "咋整") only asks.
_INTERROGATIVE_RE = re.compile(r"什么|啥|哪|怎么?|咋|如何|吗|呢|多少|几|多久|多长|谁")


def asks_only(word: str) -> bool:
    """Whether a question's word only asks: it holds an interrogative ("哪", "咋", "多少")
    and is an answer-type phrase as a whole ("多长时间", "咋办") or has at most one
    other character ("哪查", "几个"). Such a word is in no document; counting it
    dilutes a question's coverage. Nouns that name what is asked ("密码", "价格") do
    not only ask."""
    rest = _INTERROGATIVE_RE.sub("", word)
    if len(rest) == len(word):
        return False
    return len(rest) <= 1 or any(kind.asked.fullmatch(word) for kind in TYPES)


def without_asking(weights: dict[str, float]) -> dict[str, float]:
    """``weights`` (word -> weight) without the words that only ask (:func:`asks_only`);
    ``weights`` unchanged when every word only asks."""
    kept = {word: weight for word, weight in weights.items() if not asks_only(word)}
    return kept or weights


def content_terms(question: str) -> dict[str, float]:
    """The question's content words -> IDF weight (:func:`gcite.knowledge.sparse.terms`),
    without what only asks: the answer-type phrases ("多长时间", "在哪"), interrogatives
    and particles, a leading "那 / 还有"."""
    text = _JOINER_RE.sub("", question.strip())
    for kind in TYPES:
        text = kind.asked.sub(" ", text)
    return dict(terms(_ASKING_RE.sub(" ", text)))


def _close_in_order(word: str, text: str) -> bool:
    """A two-character word whose characters occur in order, close together ("灯坏" in
    "灯具损坏")."""
    first = text.find(word[0])
    while first >= 0:
        if word[1] in text[first + 1 : first + 4]:
            return True
        first = text.find(word[0], first + 1)
    return False


def _word_found(word: str, text: str, synonyms: Synonyms | None = None) -> float:
    """1 when ``word`` (or one of its ``synonyms``, :data:`SYNONYMS` when None) is in
    ``text``; 0.5 when half its bigrams are (typos, other cuts) or, for a two-character
    word, its characters are close together in order."""
    table = SYNONYMS if synonyms is None else synonyms
    if word in text or any(alt in text for alt in table.get(word, ())):
        return 1.0
    if len(word) > 2 and bigram_coverage(word, text) >= 0.5:
        return 0.5
    if len(word) == 2 and _close_in_order(word, text):
        return 0.5
    return 0.0


def word_cover(
    weights: dict[str, float], text: str, context: str = "", synonyms: Synonyms | None = None
) -> tuple[float, tuple[str, ...]]:
    """(share of the weight of ``weights`` found in ``text`` - in ``context``, such as
    the cited documents' titles, at half - and the words not found in ``text``).
    ``synonyms``: word -> written forms that count as the word (:data:`SYNONYMS` when
    None)."""
    total = sum(weights.values())
    if total <= 0:
        return 1.0, ()
    low, ctx = text.lower(), context.lower()
    found = 0.0
    missing: list[str] = []
    for word, weight in weights.items():
        share = _word_found(word, low, synonyms)
        if share < 1.0 and ctx:
            share = max(share, 0.5 * _word_found(word, ctx, synonyms))
        found += share * weight
        if share < 1.0:
            missing.append(word)
    return found / total, tuple(missing)


#: A part counts as answered when the answer gives its strict types and holds at least
#: this share of its content words' weight, or ``MIN_WORDS_FOUND`` of its own words
#: (a long question describes a situation in words the answer need not repeat).
MIN_WORD_COVER = 0.12
MIN_WORDS_FOUND = 2
#: A part of at most this many content words that asks no type of its own takes the
#: types of the carried question (an ellipsis); a longer one asks nothing typed.
ELLIPTICAL_WORDS = 2
#: Carried words (another part, the earlier turn) weigh at most this share of the part's
#: own words in all.
CARRIED_SHARE = 0.5


@dataclass(frozen=True)
class PartCheck:
    """One question part against the answer: ``types`` asked, ``typed`` (the answer gives
    a strict type asked, or none is strict), ``cover`` (0..1) and ``missing`` content
    words, ``found`` (how many of the part's own content words the answer holds),
    ``every`` (the answer gives every strict type asked: the verifier flags an answer to
    a part asking two values, "这算几级的事 多快到", that gives one; the offline answerer
    still gives what it has), ``answered`` (typed and :meth:`covered`)."""

    text: str
    types: tuple[str, ...]
    typed: bool
    cover: float
    missing: tuple[str, ...] = field(default_factory=tuple)
    found: int = 0
    every: bool = True

    def covered(self, min_cover: float = MIN_WORD_COVER, min_found: int = MIN_WORDS_FOUND) -> bool:
        """``min_cover`` of the weight, or ``min_found`` of the part's own words, found."""
        return self.cover >= min_cover or self.found >= min_found

    @property
    def answered(self) -> bool:
        """Typed and covered (see the class docstring)."""
        return self.typed and self.covered()


def check_part(
    part: str,
    answer: str,
    *,
    carried: str = "",
    context: str = "",
    synonyms: Synonyms | None = None,
) -> PartCheck:
    """``part`` of a question against the ``answer`` text (markers removed).

    ``carried``: the subject carried from the earlier turn or the other parts; its words
    join at half weight (all of them together at most ``CARRIED_SHARE`` of the part's
    own), and its types apply when the part asks for none itself.
    ``context``: text the answer stands in (the cited documents' titles): words found
    there count half. ``synonyms``: word -> written forms that count as the word
    (:data:`SYNONYMS` when None).
    """
    weights = content_terms(part)
    own = sum(weights.values())
    extra = {w: v for w, v in content_terms(carried).items() if w not in weights}
    scale = min(0.5, CARRIED_SHARE * own / sum(extra.values())) if own and extra else 0.5
    for word, weight in extra.items():
        weights[word] = scale * weight
    # an elliptical part ("那白天呢") asks what the carried question asks; a part that
    # names its own subject in words and asks no type asks nothing typed
    elliptical = len(content_terms(part)) <= ELLIPTICAL_WORDS
    types = question_types(part) or (question_types(carried) if carried and elliptical else ())
    cover, missing = word_cover(weights, answer, context, synonyms)
    found = sum(1 for word in content_terms(part) if word not in missing)
    typed = gives_any(types, answer) and units_agree(part, answer)
    # a part asking several values ("这算几级的事 多快到") is answered by all of them
    every = all(gives(name, answer) for name in strict_types(types))
    return PartCheck(part, types, typed, round(cover, 3), missing, found, every)


def own_cover(part: str, answer: str, context: str = "") -> float:
    """The share of the weight of ``part``'s own content words (:func:`content_terms`,
    nothing carried) that ``answer`` holds (``context`` at half, :func:`word_cover`);
    1.0 when the part has none."""
    return word_cover(content_terms(part), answer, context)[0]


#: A space between two Chinese characters: on a phone it often ends a clause.
_CJK_SPACE_RE = re.compile(r"(?<=[\u4e00-\u9fff])\s+(?=[\u4e00-\u9fff])")


def spaced_sides(part: str) -> list[str]:
    """``part`` cut at the spaces between Chinese characters when every piece asks
    something of its own (an answer type, an interrogative, a question mark; at least
    ``MIN_PART_CHARS`` characters): "会议室一次最多能订几个钟头 里面能抽烟不" is two
    questions typed with a space between them. ``[part]`` otherwise ("订了会议室人没来
    会给留多久": the first piece says the situation). Not a cut of :func:`question_parts`:
    the sides are checked for the answer type they ask only (their few words are often
    said otherwise in a right answer)."""
    sides = [side.strip() for side in _CJK_SPACE_RE.split(part) if side.strip()]
    if len(sides) < 2 or not all(_asks(s) and len(s) >= MIN_PART_CHARS for s in sides):
        return [part]
    return sides


def sides_typed(part: str, answer: str, *, carried: str = "") -> bool:
    """Whether ``answer`` gives every side of ``part`` (:func:`spaced_sides`) the strict
    answer type that side asks (:attr:`PartCheck.typed` and :attr:`PartCheck.every`;
    a side asking no type of its own is given it); True for a part of one side."""
    sides = spaced_sides(part)
    if len(sides) < 2:
        return True
    checks = (check_part(side, answer, carried=carried) for side in sides)
    return all(check.typed and check.every for check in checks)


def answer_check(
    question: str, answer: str, *, carried: str = "", context: str = ""
) -> list[PartCheck]:
    """Every part of ``question`` (:func:`question_parts`) checked against ``answer``."""
    parts = question_parts(question)
    out: list[PartCheck] = []
    for part in parts:
        others = " ".join(p for p in parts if p is not part)
        also = " ".join(x for x in (carried, others) if x)
        out.append(check_part(part, answer, carried=also, context=context))
    return out


#: A document sentence whose character bigrams a cited web page holds at least this
#: share of says the same as the page (:func:`better_answer`, ``over_web``).
SAME_STATEMENT = 0.5


@dataclass(frozen=True)
class Better:
    """A sentence of a better-ranked knowledge-base chunk that answers a question part
    better than the answer (:func:`better_answer`): the chunk's ``id``, the sentence's
    ``position`` among the chunk's body sentences and its ``text``."""

    id: str
    position: int
    text: str


def outranked_by(
    question: str,
    checks: Sequence[PartCheck],
    cited: Collection[str],
    chunks: Sequence[Mapping[str, Any]],
    *,
    carried: str = "",
) -> str | None:
    """The id of the chunk of :func:`better_answer` for what the answer cites, else None.

    The answer's own ``checks`` are first raised to its cited chunks' best sentences
    (:func:`cited_checks`): an answer in its own words (a model's paraphrase) is judged
    by the sentence its citation points at, so only a better-ranked chunk that answers
    better than every cited chunk outranks it.
    """
    own = cited_checks(question, checks, cited, chunks, carried=carried)
    better = better_answer(question, own, cited, chunks, carried=carried, over_web=True)
    return None if better is None else better.id


def cited_checks(
    question: str,
    checks: Sequence[PartCheck],
    cited: Collection[str],
    chunks: Sequence[Mapping[str, Any]],
    *,
    carried: str = "",
) -> list[PartCheck]:
    """``checks`` (the answer's, one per part of ``question``), each replaced by the
    check of the cited chunks' sentence that answers the part (gives the type asked and
    is covered, :attr:`PartCheck.answered`) with the largest word share when that share
    is larger. ``cited``: the ids the answer cites; ``chunks``: the run's chunks
    (``id``, ``content``, ``document_title``; any source type)."""
    best = list(checks)
    for chunk in chunks:
        if str(chunk.get("id") or "").strip() not in cited:
            continue
        for _, _, theirs in _body_checks(question, chunk, carried):
            best = [
                other if other.answered and other.cover > mine.cover else mine
                for mine, other in zip(best, theirs, strict=False)
            ]
    return best


def _body_checks(
    question: str, chunk: Mapping[str, Any], carried: str, keep: SentenceFilter | None = None
) -> Iterator[tuple[int, str, list[PartCheck]]]:
    """For each body sentence of ``chunk`` (headings left out; none when its ``content``
    is not text; those ``keep`` rejects skipped): its position among them, its text and
    :func:`answer_check` of it against ``question``, the chunk's ``document_title`` as
    context."""
    content = chunk.get("content")
    if not isinstance(content, str):
        return
    title = str(chunk.get("document_title") or "")
    body = [s for s in sentences(content, semicolons=False) if not s.heading]
    law = law_articles(content)
    for position, sentence in enumerate(body):
        if keep is not None and not keep(title, sentence, law):
            continue
        yield (
            position,
            sentence.text,
            answer_check(question, sentence.text, carried=carried, context=title),
        )


def better_answer(
    question: str,
    checks: Sequence[PartCheck],
    cited: Collection[str],
    chunks: Sequence[Mapping[str, Any]],
    *,
    carried: str = "",
    over_web: bool = False,
) -> Better | None:
    """The sentence that answers some part of ``question`` better than the answer does
    in the best-ranked knowledge-base chunk ranked above every cited one that has one
    (the sentence of the largest gain in word share; the first of equals), else None.

    ``checks``: the answer's own checks of the parts (:func:`answer_check`); ``cited``:
    the ids of the chunks the answer cites; ``chunks``: the run's chunks in their order
    (the knowledge base first, then by score: ``id``, ``source_type``, ``content``,
    ``document_title``). A sentence of such a chunk answers a part better when it gives
    the type the part asks (:attr:`PartCheck.typed`), is covered by the answerer's own
    rule (:meth:`PartCheck.covered`) and holds a larger share of the part's content
    words than the answer: the answer quotes a web page or a lower-ranked document
    while the retrieval's better-ranked document says it in the question's own words.
    ``over_web`` (the verifier's check, not the answerer's choice): against an answer
    citing only web pages, a sentence giving a strict type asked is better even with
    fewer of the question's words, unless the cited pages say it too (they hold
    ``SAME_STATEMENT`` of its character bigrams). Only sentences that may answer
    ``question`` at all are looked at (:func:`gcite.verify.scope.in_scope`: not another
    place's regulation, not a penalty provision for a question about the rule).
    """
    ranks = [k for k, chunk in enumerate(chunks) if str(chunk.get("id") or "").strip() in cited]
    if not ranks:
        return None
    web_only = over_web and all(chunks[k].get("source_type") == "web" for k in ranks)
    said = " ".join(str(chunks[k].get("content") or "") for k in ranks) if web_only else ""
    keep = in_scope(question, (str(c.get("document_title") or "") for c in chunks))
    best: tuple[float, Better] | None = None
    for chunk in chunks[: min(ranks)]:
        chunk_id = str(chunk.get("id") or "").strip()
        if chunk.get("source_type") != "rag" or not chunk_id:
            continue
        for position, text, theirs in _body_checks(question, chunk, carried, keep):
            # a web page saying what the document says is as good an answer
            over = web_only and bigram_coverage(text, said) < SAME_STATEMENT
            gain = max(
                (_gain(mine, other, over) for mine, other in zip(checks, theirs, strict=False)),
                default=0.0,
            )
            if gain > 0 and (best is None or gain > best[0]):
                best = (gain, Better(chunk_id, position, text))
        if best is not None:  # the best-ranked such chunk
            return best[1]
    return None


def _gain(mine: PartCheck, other: PartCheck, web_only: bool) -> float:
    """How much better a knowledge-base sentence's check ``other`` answers a part than
    the answer's ``mine`` (0: not better): it gives the type asked, is covered and holds
    more of the part's words - or, against an answer citing only web pages, gives a
    strict type asked at all (the documents outrank a web page that says it in more of
    the question's words: 1 plus the difference in word share)."""
    if not (other.typed and other.covered()):
        return 0.0
    if other.cover > mine.cover:
        return other.cover - mine.cover
    strict = set(strict_types(other.types)) - {"procedure"}
    return 1.0 + other.cover - mine.cover if web_only and strict else 0.0


__all__ = [
    "MIN_WORD_COVER",
    "SYNONYMS",
    "TYPES",
    "AskType",
    "Better",
    "PartCheck",
    "Synonyms",
    "answer_check",
    "asks_only",
    "better_answer",
    "check_part",
    "cited_checks",
    "content_terms",
    "gives",
    "gives_any",
    "outranked_by",
    "own_cover",
    "question_parts",
    "question_types",
    "sides_typed",
    "spaced_sides",
    "strict_types",
    "units_agree",
    "without_asking",
    "word_cover",
]
