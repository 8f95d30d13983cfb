"""More training projects for the learned ranker (``python -m lab train ranker``).

Small and medium pure-Python PyPI projects with docstrings and docs, pinned like those of
``lab.train.projects.TRAIN_PROJECTS`` (name, version, sha256 of the sdist, checked at
fetch). None is a validation or test project of the protocol
(``lab/protocol/projects.json``), a shipped eval set's, or a pallets project:
``tests/train/test_ranker_train.py`` checks that.
"""

from __future__ import annotations

from llmc.corpora import Project

_p = Project  # name, version, sha256 of the sdist


MORE_PROJECTS: tuple[Project, ...] = (
    _p("decorator", "5.1.1", "637996211036b6385ef91435e4fae22989472f9d571faba8927ba8253acbc330"),
    _p("schedule", "1.2.2", "15fe9c75fe5fd9b9627f3f19cc0ef1420508f9f9a46f45cd0769ef75ede5f0b7"),
    _p("humanfriendly", "10.0", "6b0b831ce8f15f7300721aa49829fc4e83921a9a301cc7f606be6686a2288ddc"),
    _p("pathspec", "0.12.1", "a482d51503a1ab33b1c67a6c3813a26953dbdc71c31dacaef9a838c4e29f5712"),
    _p("platformdirs", "4.3.6", "357fb2acbc885b0419afd3ce3ed34564c13c9b95c89360cd9563f73aa5e2b907"),
    _p("filelock", "3.16.1", "c249fbfcd5db47e5e2d6d62198e565475ee65e4831e2561c8e313fa7eb961435"),
    _p("tqdm", "4.66.5", "e1020aef2e5096702d8a025ac7d16b1577279c9d63f8375b63083e9a5f0fcbad"),
    _p("inflect", "7.4.0", "904baa17cc2cb74827a6c27b95692e95670dadc72b208b3e8c1c05aeed47026b"),
    _p("python-slugify", "8.0.4", "59202371d1d05b54a9e7720c5e038f928f45daaffe41dd10822f3907b937c856"),
    _p("jmespath", "1.0.1", "90261b206d6defd58fdd5e85f478bf633a2901798906be2ad389150c5c60edbe"),
    _p("deprecated", "1.2.14", "e5323eb936458dccc2582dc6f9c322c852a775a27065ff2b0c4970b9d53d01b3"),
    _p("backoff", "2.2.1", "03f829f5bb1923180821643f8753b0502c3b682293992485b0eef2807afa5cba"),
    _p("cattrs", "24.1.2", "8028cfe1ff5382df59dd36474a86e02d817b06eaf8af84555441bac915d2ef85"),
    _p("cerberus", "1.3.5", "81011e10266ef71b6ec6d50e60171258a5b134d69f8fb387d16e4936d0d47642"),
    _p("voluptuous", "0.15.2", "6ffcab32c4d3230b4d2af3a577c87e1908a714a11f6f95570456b1849b0279aa"),
    _p("schema", "0.7.7", "7da553abd2958a19dc2547c388cde53398b39196175a9be59ea1caf5ab0a1807"),
    _p("jsonpatch", "1.33", "9fcd4009c41e6d12348b4a0ff2563ba56a2923a7dfee731d004e212e1ee5030c"),
    _p("jsonpointer", "3.0.0", "2b2d729f2091522d61c3b31f82e11870f60b68f43fbc705cb76bf4b832af59ef"),
    _p("dill", "0.3.9", "81aa267dddf68cbfe8029c42ca9ec6a4ab3b22371d1c450abc54422577b4512c"),
    _p("pexpect", "4.9.0", "ee7d41123f3c9911050ea2c2dac107568dc43b2d3b0c7557a33212c398ead30f"),
    _p("portalocker", "2.10.1", "ef1bf844e878ab08aee7e40184156e1151f228f103aa5c6bd0724cc330960f8f"),
    _p("invoke", "2.2.0", "ee6cbb101af1a859c7fe84f2a264c059020b0cb7fe3535f9424300ab568f6bd5"),
    _p("bleach", "6.2.0", "123e894118b8a599fd80d3ec1a6d4cc7ce4e5882b1317a7e1ba69b56e95f991f"),
    _p("mistune", "3.0.2", "fc7f93ded930c92394ef2cb6f04a8aabab4117a91449e72dcc8dfa646a508be8"),
    _p("markdown2", "2.5.1", "12fc04ea5a87f7bb4b65acf5bf3af1183b20838cc7d543b74c92ec7eea4bbc74"),
    _p("wcwidth", "0.2.13", "72ea0c06399eb286d978fdedb6923a9eb47e1c486ce63e9b4e64fc18303972b5"),
    _p("python-dotenv", "1.0.1", "e324ee90a023d808f1959c46bcbc04446a10ced277783dc6ee09987c37ec10ca"),
    _p("prettytable", "3.12.0", "f04b3e1ba35747ac86e96ec33e3bb9748ce08e254dc2a1c6253945901beec804"),
    _p("configobj", "5.0.9", "03c881bbf23aa07bccf1b837005975993c4ab4427ba57f959afdd9d1a2386848"),
    _p("toml", "0.10.2", "b3bda1d108d5dd99f4a20d24d9c348e91c4db7ab1b749200bded2f839ccbe68f"),
    _p("bidict", "0.23.1", "03069d763bc387bbd20e7d49914e75fc4132a41937fa3405417e1a5a2d006d71"),
    _p("h2", "4.1.0", "a83aca08fbe7aacb79fec788c9c0bac936343560ed9ec18b82a13a12c28d2abb"),
    _p("wsproto", "1.2.0", "ad565f26ecb92588a3e43bc3d96164de84cd9902482b130d0ddbaa9664a85065"),
    _p("outcome", "1.3.0.post0", "9dcf02e65f2971b80047b377468e72a268e15c0af3cf1238e6ff14f7f91143b8"),
    _p("rfc3986", "2.0.0", "97aacf9dbd4bfd829baad6e6309fa6573aaf1be3f6fa735c8ab05e46cecb261c"),
    _p("furl", "2.1.3", "5a6188fe2666c484a12159c18be97a1977a71d632ef5bb867ef15f54af39cc4e"),
    _p("fire", "0.7.0", "961550f07936eaf65ad1dc8360f2b2bf8408fad46abbfa4d2a3794f8d2a95cdf"),
    _p("diskcache", "5.6.3", "2c3a3fa2743d8535d832ec61c2054a1641f41775aa7c556758a109941e33e4fc"),
    _p("isodate", "0.7.2", "4cd1aa0f43ca76f4a6c6c0292a85f40b35ec2e43e315b59f06e6d32171a953e6"),
    _p("croniter", "5.0.1", "7d9b1ef25b10eece48fdf29d8ac52f9b6252abff983ac614ade4f3276294019e"),
    _p("parse", "1.20.2", "b41d604d16503c79d81af5165155c0b20f6c8d6c559efa66b4b695c3e5a0a0ce"),
    _p("responses", "0.25.3", "617b9247abd9ae28313d57a75880422d55ec63c29d33d629697590a034358dba"),
    _p("freezegun", "1.5.1", "b29dedfcda6d5e8e083ce71b2b542753ad48cfec44037b3fc79702e2980a89e9"),
    _p("transitions", "0.9.2", "2f8490dbdbd419366cef1516032ab06d07ccb5839ef54905e842a472692d4204"),
    _p("funcy", "2.0", "3963315d59d41c6f30c04bc910e10ab50a3ac4a225868bfa96feed133df075cb"),
    _p("glom", "23.5.0", "06af5e3486aacc59382ba34e53ebeabd7a9345d78f7dbcbee26f03baa4b83bac"),
    _p("pydash", "8.0.4", "a33fb17b4b06c617da5c57c711605d2dc8723311ee5388c8371f87cd44bf4112"),
    _p("intervaltree", "3.1.0", "902b1b88936918f9b2a19e0e5eb7ccb430ae45cde4f39ea4b36932920d33952d"),
    _p("hyperlink", "21.0.0", "427af957daa58bc909471c6c40f74c5450fa123dd093fc53efd2e91d2705a56b"),
    _p("pyee", "12.1.1", "bbc33c09e2ff827f74191e3e5bbc6be7da02f627b7ec30d86f5ce1a6fb2424a3"),
    _p("pyjwt", "2.9.0", "7e1e5b56cc735432a7369cbfa0efe50fa113ebecdc04ae6922deba8b84582d0c"),
    _p("oauthlib", "3.2.2", "9859c40929662bec5d64f34d01c99e093149682a3f38915dc0655d5a633dd918"),
    _p("requests-toolbelt", "1.0.0", "7681a0a3d047012b5bdc0ee37d7f8f07ebe76ab08caeccfc3921ce23c88d5bc6"),
    _p("environs", "11.2.1", "e068ae3174cef52ba4b95ead22e639056a02465f616e62323e04ae08e86a75a4"),
    _p("chevron", "0.14.0", "87613aafdf6d77b6a90ff073165a61ae5086e21ad49057aa0e53681601800ebf"),
    _p("sh", "2.1.0", "7e27301c574bec8ca5bf6f211851357526455ee97cd27a7c4c6cc5e2375399cb"),
    _p("coloredlogs", "15.0.1", "7c991aa71a4577af2f82600d8f8f3a89f936baeaf9b50a9c197da014e5bf16b0"),
    _p("parsedatetime", "2.6", "4cb368fbb18a0b7231f4d76119165451c8d2e35951455dfee97c62a87b04d455"),
)  # fmt: skip

__all__ = ["MORE_PROJECTS"]
