// Keeps, in a symbol graph, only the symbols declared in one module's sources: a module that
// re-exports another (`@_exported import`) otherwise documents the other's symbols too, with
// links to articles it does not have. Used by Scripts/docs.sh.
//   swift Scripts/own-symbols.swift <graph.json> <Sources/Module/> <output.json>
import Foundation

let args = CommandLine.arguments
guard args.count == 4 else { fatalError("usage: own-symbols <graph.json> <sources dir> <output.json>") }
let data = try Data(contentsOf: URL(fileURLWithPath: args[1]))
var graph = try JSONSerialization.jsonObject(with: data) as! [String: Any]
let sources = URL(fileURLWithPath: args[2]).standardizedFileURL.path
let symbols = graph["symbols"] as! [[String: Any]]
var kept: [[String: Any]] = []
var keptIDs = Set<String>()
for s in symbols {
    let uri = (s["location"] as? [String: Any])?["uri"] as? String ?? ""
    let path = URL(string: uri)?.path ?? uri
    if path.hasPrefix(sources + "/") {
        kept.append(s)
        keptIDs.insert((s["identifier"] as! [String: Any])["precise"] as! String)
    }
}
graph["symbols"] = kept
graph["relationships"] = (graph["relationships"] as! [[String: Any]]).filter { keptIDs.contains($0["source"] as! String) }
try JSONSerialization.data(withJSONObject: graph).write(to: URL(fileURLWithPath: args[3]))
