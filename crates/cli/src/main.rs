fn main() {
    println!("smtlab");
}
