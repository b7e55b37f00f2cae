"""A gist of a file view keeps the declarations of new names, the lines a later `goto` or `edit` comes back to."""

from __future__ import annotations

import pytest

from ctxwarden import TokenMeter
from ctxwarden.core.gist import DEFINITION, gist

METER = TokenMeter()

HEADER = "[File: /apache__dubbo/dubbo-registry/src/main/java/org/apache/dubbo/registry/NacosRegistry.java (737 lines)]"
JAVA_VIEW = (
    HEADER
    + """
(111 more lines above)
112:    /**
113:     * The separator for service name
114:     * Change a constant to be configurable, it's designed for Windows file name that is compatible with old
115:     * Nacos binary release(< 0.6.1)
116:     */
117:    private static final String SERVICE_NAME_SEPARATOR = System.getProperty("nacos.service.name.separator", ":");
118:
119:    /**
120:     * The interval in second of lookup Nacos service names(only for Dubbo-OPS)
121:     */
122:    private volatile ScheduledExecutorService scheduledExecutorService;
123:
124:    public NacosRegistry(URL url, NacosNamingServiceWrapper namingService) {
125:        super(url);
126:        this.namingService = namingService;
127:    }
128:
129:    @Override
130:    public void doRegister(URL url) {
131:        try {
132:            String serviceName = getServiceName(url);
133:            Instance instance = createInstance(url);
134:            /**
135:             *  namingService.registerInstance with {@link org.apache.dubbo.registry.support.AbstractRegistry}
136:             *  default {@link DEFAULT_GROUP}, see https://github.com/apache/dubbo/issues/5978
137:             */
138:            namingService.registerInstance(serviceName, getUrl().getGroup(Constants.DEFAULT_GROUP), instance);
139:        } catch (Throwable cause) {
140:            throw new RpcException("Failed to register " + url + " to nacos " + getUrl(), cause);
141:        }
142:    }
143:
144:    @Override
145:    public void doSubscribe(final URL url, final NotifyListener listener) {
146:        Set<String> serviceNames = getServiceNames(url, listener);
147:        doSubscribe(url, listener, serviceNames);
148:    }
(589 more lines below)"""
)


def test_a_gist_of_a_java_view_keeps_the_declarations_of_its_methods() -> None:
    kept = gist(JAVA_VIEW, 200, METER.counter).text.splitlines()
    assert "130:    public void doRegister(URL url) {" in kept
    assert "145:    public void doSubscribe(final URL url, final NotifyListener listener) {" in kept
    assert "124:    public NacosRegistry(URL url, NacosNamingServiceWrapper namingService) {" in kept


def test_a_file_viewed_again_gets_no_credit_for_declaring_what_the_thread_showed() -> None:
    """Each view of a file re-declares every name in it: only a name the thread has not shown twice is news, so a
    gist of a file read again stays as small as what is new in it."""
    view = "\n".join(
        line for i in range(40) for line in (f"{10 * i}:    def handler_number_{i}(self, request):", f"{10 * i + 1}:")
    )
    fresh = gist(view, 200, METER.counter)
    again = gist(view, 200, METER.counter, seen=lambda _token: 2)
    assert fresh.shown_lines >= 10
    assert again.shown_lines <= 2  # only the edge lines: the first and the last of the output


@pytest.mark.parametrize(
    "line",
    [
        "169:    public void doRegister(URL url) {",
        "88:public class NacosRegistry extends FailbackRegistry {",
        "    private static Map<String, List<Instance>> index(final URL url) throws Exception {",
        "    @Override public boolean isAvailable() {",
        "  12: async def fetch_all(session):",
        "pub(crate) fn resolve_path(input: &str) -> PathBuf {",
        "export default function RegistryView(props) {",
        "public interface NotifyListener {",
        "    protected JsonParser _createParser(char[] data, int offset, int len) throws IOException {",
    ],
)
def test_declarations_are_recognised_in_several_languages(line: str) -> None:
    assert DEFINITION.match(line), line


@pytest.mark.parametrize(
    "line",
    [
        '117:    private static final String SERVICE_NAME_SEPARATOR = System.getProperty("sep", ":");',
        "            String serviceName = getServiceName(url);",
        "        if (url == null) {",
        "            return urls.addAll(buildURLs(url, instances));",
        "internal error (code 3) while reading",
        "The class loader failed to start",
        " " * 990 + "x",  # read once: every run of the pattern is possessive
        "public " + "a " * 490 + "b",
    ],
)
def test_calls_assignments_and_prose_are_not_declarations(line: str) -> None:
    assert not DEFINITION.match(line), line
